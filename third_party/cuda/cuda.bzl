"""CUDA under Bazel 4 without rules_cuda: nvcc runs in a genrule.

Every CUDA target is compatible only with `--config=cuda` (which sets
`--define=use_cuda=true`); a plain `bazel build //...` skips them.

  cuda_library(name, srcs, hdrs, cu_deps_hdrs, deps, copts)
      .cu files -> lib<name>_cu.a (nvcc, archs in CUDA_GENCODE) -> cc_library `name`.
  cuda_cc_library / cuda_cc_test / cuda_cc_binary
      gcc-compiled host code that includes <cuda_runtime_api.h>: adds CUDA_COPTS, the
      cudart link flags and the CUDA-only compatibility.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

# Real code for Ampere (sm_80), Ada (sm_89) and Hopper with its arch-specific features
# (sm_90a: wgmma/TMA; runs only on H100/H200), plus compute_90a PTX for JIT.
CUDA_GENCODE = [
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_89,code=sm_89",
    "-gencode arch=compute_90a,code=sm_90a",
    "-gencode arch=compute_90a,code=compute_90a",
]

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler -fPIC",
    "--expt-relaxed-constexpr",
] + CUDA_GENCODE

# Host (gcc) code that includes CUDA headers. copts do not propagate, so every target
# whose sources include <cuda_runtime_api.h> must use this (the cuda_cc_* macros do).
CUDA_COPTS = ["-idirafter", "/usr/local/cuda/include"]

CUDA_LINKOPTS = [
    "-L/usr/local/cuda/lib64",
    "-Wl,-rpath,/usr/local/cuda/lib64",
    "-lcudart",
]

def cuda_only():
    """target_compatible_with value for targets that need --config=cuda."""
    return select({
        "//:use_cuda": [],
        "//conditions:default": ["//:cuda_incompatible"],
    })

def cuda_library(name, srcs, hdrs = [], cu_deps_hdrs = [], deps = [], copts = [],
                 visibility = None, **kwargs):
    """Compiles `srcs` (.cu) with nvcc into a static archive wrapped in cc_library `name`.

    Args:
      srcs: .cu files (each compiled to one object).
      hdrs: interface headers: seen by nvcc and exported to C++ dependents.
      cu_deps_hdrs: other repo headers the .cu files include (e.g. "//kernels:dtype.h");
        nvcc runs sandboxed and only sees declared files.
      deps: cc_library deps for the C++ side (linking, headers of dependents).
      copts: extra nvcc flags.
    """
    archive = "lib%s_cu.a" % name
    objdir = "$(@D)/_nvcc_objs/%s" % name
    flags = " ".join(NVCC_FLAGS + copts)
    cmd = "\n".join([
        "set -e",
        "OBJDIR=%s" % objdir,
        "mkdir -p $$OBJDIR",
        "export TMPDIR=$$OBJDIR",
        "OBJS=",
        "for src in %s; do" % " ".join(["$(location %s)" % s for s in srcs]),
        "  obj=$$OBJDIR/$$(echo $$src | tr '/' '_').o",
        "  %s %s -I. -I$(GENDIR) -I$(BINDIR) -c $$src -o $$obj" % (NVCC, flags),
        "  OBJS=\"$$OBJS $$obj\"",
        "done",
        "rm -f $@",
        "ar rcs $@ $$OBJS",
    ])
    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + hdrs + cu_deps_hdrs,
        outs = [archive],
        cmd = cmd,
        message = "nvcc %s" % name,
        target_compatible_with = cuda_only(),
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [":" + archive],
        hdrs = hdrs,
        deps = deps + ["//third_party/cuda:cuda_runtime"],
        linkstatic = True,
        target_compatible_with = cuda_only(),
        visibility = visibility,
        **kwargs
    )

def _cuda_host_kwargs(kwargs):
    kwargs["copts"] = kwargs.get("copts", []) + CUDA_COPTS
    kwargs["deps"] = kwargs.get("deps", []) + ["//third_party/cuda:cuda_runtime"]
    kwargs["target_compatible_with"] = cuda_only()
    return kwargs

def cuda_cc_library(**kwargs):
    native.cc_library(**_cuda_host_kwargs(kwargs))

def cuda_cc_test(**kwargs):
    native.cc_test(**_cuda_host_kwargs(kwargs))

def cuda_cc_binary(**kwargs):
    native.cc_binary(**_cuda_host_kwargs(kwargs))
