"""The CUDA toolkit as a local repository: $CUDA_HOME, else /usr/local/cuda.

Exposes nvcc (used by rl_cuda_library under --config=cuda) and the CUDA
runtime. A machine without the toolkit still builds the CPU configuration:
the repository then holds a BUILD file whose targets fail with a clear
message only when --config=cuda asks for them.
"""

def _cuda_repository_impl(rctx):
    home = rctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = rctx.path(home + "/bin/nvcc")
    if not nvcc.exists:
        rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])
genrule(
    name = "nvcc",
    outs = ["nvcc_missing"],
    cmd = "echo 'nvcc not found under CUDA_HOME={home}; install the CUDA toolkit or set CUDA_HOME' >&2; exit 1",
)
cc_library(name = "cudart")
""".format(home = home))
        return
    rctx.symlink(rctx.path(home + "/include"), "include")
    lib = rctx.path(home + "/lib64")
    rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# nvcc runs from the real toolkit directory so that it finds its own
# components (cicc, ptxas, the CUDA headers) next to itself.
sh_binary(
    name = "nvcc",
    srcs = ["nvcc.sh"],
)

# The CUDA runtime API (cuda_runtime.h) for host code, statically linked.
cc_library(
    name = "cudart",
    hdrs = glob(["include/*.h", "include/crt/*.h", "include/crt/*.hpp"]),
    includes = ["include"],
    linkopts = ["-L{lib}", "-lcudart_static", "-ldl", "-lrt", "-lpthread"],
)
""".format(lib = lib))
    rctx.file("nvcc.sh", "#!/bin/sh\nexec {home}/bin/nvcc \"$@\"\n".format(home = home), executable = True)

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    environ = ["CUDA_HOME"],
    local = True,
)
