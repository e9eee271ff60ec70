"""Project build macros: flags, test sizes and code generation in one place."""

RL_COPTS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
    "-Wno-missing-field-initializers",
]

# GCC's full vectoriser at -O2 (clang has no such flag: --config=fuzz).
RL_GCC_VECTORIZE = select({
    "//tools:clang": [],
    "//conditions:default": ["-fvect-cost-model=dynamic"],
})

def rl_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = RL_COPTS + copts, **kwargs)

def rl_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = RL_COPTS + copts, **kwargs)

def rl_cc_test(name, copts = [], deps = [], size = "small", **kwargs):
    """A GoogleTest test; gmock_main provides main()."""
    native.cc_test(
        name = name,
        copts = RL_COPTS + copts,
        size = size,
        deps = deps + ["@system_libs//:gtest_main"],
        **kwargs
    )

def rl_cc_benchmark(name, copts = [], deps = [], **kwargs):
    """A benchmark binary; build and run it with --config=opt."""
    native.cc_binary(
        name = name,
        copts = RL_COPTS + copts,
        deps = deps + ["@system_libs//:benchmark"],
        **kwargs
    )

def rl_proto_library(name, srcs, deps = [], visibility = None):
    """C++ (messages and gRPC services) and Python code from .proto files.

    Runs Debian's protoc with grpc_cpp_plugin / grpc_python_plugin, so no
    protobuf or gRPC source repository is needed.

    Targets: `name` (cc_library), `name_py` (py_library), `name_srcs`
    (the .proto files, for dependants' imports).
    """
    native.filegroup(name = name + "_srcs", srcs = srcs + [d + "_srcs" for d in deps], visibility = visibility)
    stems = [s[:-len(".proto")] for s in srcs]
    pkg = native.package_name()
    cc_hdrs = [s + ".pb.h" for s in stems] + [s + ".grpc.pb.h" for s in stems]
    cc_srcs = [s + ".pb.cc" for s in stems] + [s + ".grpc.pb.cc" for s in stems]
    py_srcs = [s + "_pb2.py" for s in stems] + [s + "_pb2_grpc.py" for s in stems]
    inputs = " ".join([pkg + "/" + s for s in srcs])
    native.genrule(
        name = name + "_cc_gen",
        srcs = [name + "_srcs"],
        outs = cc_hdrs + cc_srcs,
        tools = ["@system_protobuf//:bin/protoc", "@system_grpc//:bin/grpc_cpp_plugin"],
        cmd = ("$(location @system_protobuf//:bin/protoc) -I. " +
               "--cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$(location @system_grpc//:bin/grpc_cpp_plugin) " + inputs),
    )
    native.genrule(
        name = name + "_py_gen",
        srcs = [name + "_srcs"],
        outs = py_srcs,
        tools = ["@system_protobuf//:bin/protoc", "@system_grpc//:bin/grpc_python_plugin"],
        cmd = ("$(location @system_protobuf//:bin/protoc) -I. " +
               "--python_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$(location @system_grpc//:bin/grpc_python_plugin) " + inputs),
    )
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = cc_hdrs,
        deps = deps + ["@system_grpc//:grpc++", "@system_protobuf//:protobuf"],
        visibility = visibility,
    )
    native.py_library(
        name = name + "_py",
        srcs = py_srcs,
        deps = [d + "_py" for d in deps],
        visibility = visibility,
    )

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
]

def rl_cuda_library(name, srcs, hdrs = [], deps = [], cuda_deps_hdrs = [], includes = [], alwayslink = False, visibility = None):
    """A library of .cu sources compiled by nvcc from $CUDA_HOME.

    Built only under --config=cuda (tagged "cuda"; the default configuration
    skips such targets). `cuda_deps_hdrs` lists the headers the .cu files
    include from other targets (nvcc runs outside Bazel's C++ rules);
    `includes`, folders (from the workspace root) added to their search path;
    `alwayslink`, for objects nothing else references (a library's entry).
    """
    objs = []
    for src in srcs:
        obj = src[:-len(".cu")] + ".cu.pic.o"
        objs.append(obj)
        native.genrule(
            name = name + "_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src] + hdrs + cuda_deps_hdrs,
            outs = [obj],
            tools = ["@local_cuda//:nvcc"],
            tags = ["cuda"],
            cmd = ("$(location @local_cuda//:nvcc) -c -std=c++17 -O3 " +
                   "-Xcompiler=-fPIC --expt-relaxed-constexpr -I. -I$(GENDIR) " +
                   "".join(["-I" + d + " " for d in includes]) +
                   " ".join(CUDA_ARCH_FLAGS) + " -o $@ $(location " + src + ")"),
        )
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        # No .so of its own: the kernels' objects call the static CUDA
        # runtime (cudart_static), whose symbols a shared library cannot
        # reach in the executable. Tests link dynamically by default, and
        # on a GPU failed with "undefined symbol: __cudaPopCallConfiguration".
        linkstatic = True,
        alwayslink = alwayslink,
        tags = ["cuda"],
        visibility = visibility,
    )
