"""LibTorch as a local repository, found without any download.

Sources, in order:
  1. $LIBTORCH: a LibTorch root (include/, lib/), e.g. an official C++ zip.
  2. The `torch` package of the project's virtual environment (.venv, or
     $RL_VENV), installed by tools/setup.sh from PyPI.
  3. The system: Debian's libtorch-dev (/usr/include/torch, /usr/lib/<triplet>).
Only the CPU libraries are linked (libtorch_cpu, libc10); CUDA code of the
project builds against the CUDA toolkit through //third_party/cuda.
"""

def _find_root(rctx):
    env = rctx.os.environ
    if env.get("LIBTORCH"):
        root = rctx.path(env["LIBTORCH"])
        if not root.get_child("lib").exists:
            fail("LIBTORCH=%s has no lib/ directory" % env["LIBTORCH"])
        return struct(kind = "LIBTORCH", include = root.get_child("include"), lib = root.get_child("lib"))

    venv = env.get("RL_VENV")
    if not venv:
        venv = str(rctx.path(Label("//:WORKSPACE")).dirname) + "/.venv"
    venv_lib = rctx.path(venv + "/lib")
    if venv_lib.exists:
        for py in venv_lib.readdir():
            torch = py.get_child("site-packages").get_child("torch")
            if torch.get_child("lib").get_child("libtorch_cpu.so").exists:
                return struct(kind = "venv", include = torch.get_child("include"), lib = torch.get_child("lib"))

    system_lib = rctx.path("/usr/lib/x86_64-linux-gnu")
    if system_lib.get_child("libtorch_cpu.so").exists and rctx.path("/usr/include/torch").exists:
        return struct(kind = "system", include = rctx.path("/usr/include"), lib = system_lib)

    fail("LibTorch not found: set LIBTORCH, or run tools/setup.sh to install " +
         "torch into .venv, or install Debian's libtorch-dev")

def _libtorch_repository_impl(rctx):
    root = _find_root(rctx)
    # Only LibTorch's own header trees: the distribution also bundles
    # protobuf, fmt and pybind11 headers of other versions, which must not
    # shadow Debian's (used by gRPC and spdlog).
    for tree in ["ATen", "c10", "torch", "caffe2"]:
        rctx.symlink(root.include.get_child(tree), "include/" + tree)
    rctx.file("SOURCE", "%s %s\n" % (root.kind, root.lib))
    rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

exports_files(["SOURCE"])

cc_library(
    name = "libtorch",
    hdrs = glob(
        ["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"],
        exclude = ["include/torch/csrc/api/include/**"],
    ) + glob(["include/torch/csrc/api/include/**/*.h"]),
    includes = ["include", "include/torch/csrc/api/include"],
    # Linked from their real directory (not through Bazel's _solib symlinks)
    # so that the libraries' own RPATH, $ORIGIN/..., finds what they depend
    # on: libgomp beside them, the CUDA runtime wheels in site-packages.
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-Wl,--push-state,--no-as-needed",
        "-ltorch_cpu",
        "-lc10",
        "-Wl,--pop-state",
        "-lpthread",
    ],
    defines = ["RL_LIBTORCH_SOURCE={kind}"],
)
""".format(lib = root.lib, kind = root.kind))
    rctx.file("BUILD", rctx.read("BUILD") + _torch_cuda_build(rctx, root), executable = False)

# The CUDA headers of the wheels torch was built with (site-packages/nvidia,
# installed by `tools/setup.sh --gpu`), never the system toolkit's: code that
# includes LibTorch's CUDA headers (ATen/cuda, c10d's NCCL process group)
# compiles against the runtime it will run with.
_CUDA_WHEELS = ["cuda_runtime", "cublas", "cusparse", "cusolver", "nccl", "nvtx"]

def _toolkit_cuda_version(rctx, cuda_home):
    """The CUDA toolkit's "major.minor" from its cuda.h, or None."""
    header = rctx.path(cuda_home + "/include/cuda.h")
    if not header.exists:
        return None
    for line in rctx.read(header).splitlines():
        if line.startswith("#define CUDA_VERSION "):
            n = int(line.split(" ")[2])
            return "%d.%d" % (n // 1000, (n % 1000) // 10)
    return None

def _torch_cuda_from_toolkit(rctx, root):
    """A LibTorch root ($LIBTORCH, e.g. tools/gpu_bundle.sh's) built for the
    CUDA toolkit installed here ($CUDA_HOME, else /usr/local/cuda), same
    major.minor: its CUDA headers are then the ones that torch was built
    with. Returns the BUILD text, or None where they do not agree."""
    version_py = root.lib.dirname.get_child("version.py")
    if root.kind != "LIBTORCH" or not version_py.exists:
        return None
    torch_cuda = None
    for line in rctx.read(version_py).splitlines():
        if line.startswith("cuda") and "'" in line:
            torch_cuda = line.split("'")[1]
    cuda_home = rctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not torch_cuda or _toolkit_cuda_version(rctx, cuda_home) != torch_cuda:
        return None
    if not root.lib.get_child("libtorch_cuda.so").exists:
        return None
    rctx.symlink(rctx.path(cuda_home + "/include"), "cudatk/include")
    return """
# LibTorch's CUDA library and the headers of the CUDA {version} toolkit at
# {home}, the version this LibTorch was built for.
cc_library(
    name = "torch_cuda",
    hdrs = glob(["cudatk/include/**/*.h", "cudatk/include/**/*.hpp"]),
    includes = ["cudatk/include"],
    defines = ["USE_C10D_NCCL", "USE_CUDA"],
    linkopts = [
        "-L{lib}",
        "-Wl,--push-state,--no-as-needed",
        "-ltorch_cuda",
        "-lc10_cuda",
        "-Wl,--pop-state",
        "-L{home}/lib64",
        "-l:libcudart.so.{major}",
    ],
    deps = [":libtorch"],
)
""".format(version = torch_cuda, home = cuda_home, lib = root.lib, major = torch_cuda.split(".")[0])

def _torch_cuda_build(rctx, root):
    from_toolkit = _torch_cuda_from_toolkit(rctx, root)
    if from_toolkit:
        return from_toolkit
    nvidia = root.lib.dirname.dirname.get_child("nvidia")
    missing = [w for w in _CUDA_WHEELS if not nvidia.get_child(w).get_child("include").exists]
    cuda_lib = root.lib.get_child("libtorch_cuda.so")
    if root.kind != "venv" or missing or not cuda_lib.exists:
        why = ("the CUDA wheels' headers are missing (%s): run tools/setup.sh --gpu" % ", ".join(missing)) if missing else "LibTorch's CUDA library or the wheels' headers are not in .venv: run tools/setup.sh --gpu"
        return """
# LibTorch's CUDA library and the CUDA wheels' headers: {why}.
genrule(
    name = "torch_cuda_missing",
    outs = ["torch_cuda_missing.h"],
    cmd = "echo '{why}' >&2; exit 1",
)

cc_library(
    name = "torch_cuda",
    hdrs = [":torch_cuda_missing"],
)
""".format(why = why)
    includes = []
    for w in _CUDA_WHEELS:
        rctx.symlink(nvidia.get_child(w).get_child("include"), "cuda12/%s/include" % w)
        includes.append("cuda12/%s/include" % w)
    return """
# LibTorch's CUDA library (libtorch_cuda, libc10_cuda) and the headers of
# the CUDA wheels it was built with. Only for code loaded on demand where a
# GPU is (learner/nccl_backend.cc): the binaries link only libtorch_cpu.
cc_library(
    name = "torch_cuda",
    hdrs = glob(["cuda12/*/include/**/*.h", "cuda12/*/include/**/*.hpp"]),
    includes = {includes},
    defines = ["USE_C10D_NCCL", "USE_CUDA"],
    linkopts = [
        "-L{lib}",
        "-Wl,--push-state,--no-as-needed",
        "-ltorch_cuda",
        "-lc10_cuda",
        "-Wl,--pop-state",
        "-L{cudart}",
        "-l:libcudart.so.12",
    ],
    deps = [":libtorch"],
)
""".format(includes = includes, lib = root.lib, cudart = nvidia.get_child("cuda_runtime").get_child("lib"))

libtorch_repository = repository_rule(
    implementation = _libtorch_repository_impl,
    environ = ["LIBTORCH", "RL_VENV", "CUDA_HOME"],
    local = True,
)
