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

libtorch_repository = repository_rule(
    implementation = _libtorch_repository_impl,
    environ = ["LIBTORCH", "RL_VENV"],
    local = True,
)
