"""C++ code for tern's protos from Debian's protoc and grpc_cpp_plugin.

Bazel's own proto rules would download protobuf; a genrule over the system
compilers keeps the build offline and uses the same protobuf version as the
system libraries we link.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def tern_cc_proto_library(name, srcs, deps = [], grpc = False):
    """A cc_library with the generated messages (and gRPC stubs) of srcs.

    Args:
      name: the cc_library's name.
      srcs: .proto files under proto/ (e.g. "tern/v1/payload.proto").
      deps: other tern_cc_proto_library targets these protos import.
      grpc: also generate gRPC service stubs.
    """
    outs = []
    for src in srcs:
        stem = src[:-len(".proto")]
        outs += [stem + ".pb.h", stem + ".pb.cc"]
        if grpc:
            outs += [stem + ".grpc.pb.h", stem + ".grpc.pb.cc"]

    grpc_flags = ""
    if grpc:
        grpc_flags = ("--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " +
                      "--grpc_out=$(RULEDIR) ")

    native.genrule(
        name = name + "_gen",
        srcs = srcs + [p for p in native.glob(["tern/**/*.proto"]) if p not in srcs],
        outs = outs,
        cmd = ("/usr/bin/protoc -I" + native.package_name() + " " +
               "--cpp_out=$(RULEDIR) " + grpc_flags +
               " ".join(["$(location " + s + ")" for s in srcs])),
    )

    cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["@system//:protobuf"] + (["@system//:grpc"] if grpc else []),
    )
