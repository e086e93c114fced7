"""A libtorch given by path, for GPU workers (README, "GPU workers").

Debian's libtorch (the default, @system//:torch) is CPU-only. A worker that
trains on a GPU is built against another libtorch, such as the one inside a
CUDA PyTorch install (.../site-packages/torch, which has include/ and lib/):

    TERN_LIBTORCH=/path/to/torch bazel build --config=cuda_torch //tern

`libtorch_repository` reads TERN_LIBTORCH when Bazel fetches the
repository (again whenever the variable changes) and links that folder's
include/ and lib/ in. Without the variable the repository's target fails to
build with a message saying what to set, so a default build never needs it.
"""

_MISSING = """
genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'tern: --config=cuda_torch needs TERN_LIBTORCH=<a libtorch " +
          "folder with include/ and lib/> (README, GPU workers)' >&2; exit 1",
)

cc_library(
    name = "torch",
    hdrs = [":missing"],
    visibility = ["//visibility:public"],
)
"""

_TORCH = """
cc_library(
    name = "torch",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"]),
    includes = ["include", "include/torch/csrc/api/include"],
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-ltorch",
        "-ltorch_cpu",
        # Nothing calls into these directly; they register the CUDA kernels
        # and the CUDA device type when loaded, so they must not be dropped.
        "-Wl,--no-as-needed",
        "-ltorch_cuda",
        "-lc10_cuda",
        "-Wl,--as-needed",
        "-lc10",
    ],
    visibility = ["//visibility:public"],
)
"""

def _libtorch_repository_impl(ctx):
    root = ctx.os.environ.get("TERN_LIBTORCH", "")
    if not root:
        ctx.file("BUILD", _MISSING)
        return
    for sub in ["include/torch/csrc/api/include/torch/torch.h", "lib"]:
        if not ctx.path(root + "/" + sub).exists:
            fail("TERN_LIBTORCH=%s has no %s: point it at a libtorch folder " % (root, sub) +
                 "(for a CUDA PyTorch: python3 -c 'import torch, os; " +
                 "print(os.path.dirname(torch.__file__))')")
    ctx.symlink(root + "/include", "include")
    ctx.file("BUILD", _TORCH.format(lib = root + "/lib"))

libtorch_repository = repository_rule(
    implementation = _libtorch_repository_impl,
    environ = ["TERN_LIBTORCH"],
    local = True,
)
