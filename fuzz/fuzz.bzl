"""libFuzzer targets; built only with --config=fuzz (clang, see .bazelrc)."""

load("//tools:rl.bzl", "RL_COPTS")

def rl_cc_fuzzer(name, deps = [], **kwargs):
    """A libFuzzer binary from `name`.cc (LLVMFuzzerTestOneInput).

    Tagged manual and fuzz: gcc has no -fsanitize=fuzzer, so `bazel build
    //...` leaves these out.
    """
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = [name + ".cc"],
        copts = RL_COPTS,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual", "fuzz"],
        deps = deps,
        **kwargs
    )
