# Shim: Bazel 4.2.3's @bazel_tools//tools/jdk package (parsed for toolchain
# registration even in a C++-only build) loads @rules_java//java:defs.bzl,
# which would have to be downloaded. The project has no Java; these forward
# to the native rules so that the package parses.
def java_binary(**attrs):
    native.java_binary(**attrs)

def java_import(**attrs):
    native.java_import(**attrs)

def java_library(**attrs):
    native.java_library(**attrs)

def java_runtime(**attrs):
    native.java_runtime(**attrs)

def java_toolchain(**attrs):
    native.java_toolchain(**attrs)

def java_test(**attrs):
    native.java_test(**attrs)
