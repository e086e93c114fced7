"""CUDA kernels with the machine's nvcc, without downloading rules_cuda.

`tern_cuda_library` compiles .cu files with /usr/local/cuda/bin/nvcc into a
static archive (a genrule) and wraps it in a cc_library that links the
static CUDA runtime. It is only built under --config=cuda (the
//kernels:cuda_enabled config_setting); the default build stays CUDA-free.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

# sm_80 (A100) and sm_90 (H100/H200) as SASS, plus PTX for newer GPUs.
_GENCODE = ("-gencode=arch=compute_80,code=sm_80 " +
            "-gencode=arch=compute_90,code=sm_90 " +
            "-gencode=arch=compute_90,code=compute_90")

def tern_cuda_library(name, srcs, hdrs = [], cuda_hdrs = [], deps = [], **kwargs):
    """A cc_library of CUDA code.

    Args:
      name: the cc_library's name.
      srcs: .cu files; they may include only headers in cuda_hdrs, the CUDA
        toolkit's and the C++ standard library's (no Abseil: nvcc compiles
        them on its own, outside Bazel's C++ toolchain).
      hdrs: the C++ headers that declare the kernels' host entry points.
      cuda_hdrs: headers the .cu files include (repo-root relative paths).
      deps: cc deps of the wrapping library.
      **kwargs: passed to the cc_library (visibility, ...).
    """
    archive = "lib" + name + "_cu.a"
    objs = []
    cmds = []
    for src in srcs:
        obj = src[:-len(".cu")] + ".o"
        objs.append(obj)
        cmds.append(
            "/usr/local/cuda/bin/nvcc -std=c++17 -O3 " + _GENCODE +
            " -Xcompiler=-fPIC -Xcompiler=-O2 -I. -I$(GENDIR) " +
            "-c $(location " + src + ") -o $(@D)/" + obj.split("/")[-1],
        )
    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + cuda_hdrs + hdrs,
        outs = [archive],
        cmd = " && ".join(cmds) + " && ar rcs $@ " +
              " ".join(["$(@D)/" + o.split("/")[-1] for o in objs]),
        message = "nvcc " + name,
        # The nvcc step must be skipped wherever the library is (the
        # default build, without --config=cuda).
        target_compatible_with = kwargs.get("target_compatible_with"),
    )
    cc_library(
        name = name,
        srcs = [archive],
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart_static"],
        linkstatic = True,
        alwayslink = True,
        **kwargs
    )
