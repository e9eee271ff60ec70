"""MuJoCo as a local repository, found without any download.

The PyPI `mujoco` wheel (pinned in tools/requirements.txt, installed into
.venv by tools/setup.sh) ships the C headers (mujoco/include/mujoco/*.h)
and the shared library (mujoco/libmujoco.so.X.Y.Z); Gymnasium's wheel
ships the v5 environments' model files (gymnasium/envs/mujoco/assets/*.xml).
Both are taken from the project's virtual environment (or $RL_VENV), as
LibTorch is (third_party/libtorch).

Targets: @mujoco//:mujoco (headers + library, linked from its real
directory with an rpath to it), @mujoco//:gymnasium_assets (the XML files).
"""

def _site_packages(rctx):
    venv = rctx.os.environ.get("RL_VENV")
    if not venv:
        venv = str(rctx.path(Label("//:WORKSPACE")).dirname) + "/.venv"
    lib = rctx.path(venv + "/lib")
    if lib.exists:
        for py in lib.readdir():
            site = py.get_child("site-packages")
            if site.get_child("mujoco").get_child("include").exists:
                return site
    fail("MuJoCo not found in %s: run tools/setup.sh, which installs the " % venv +
         "pinned mujoco and gymnasium wheels into .venv")

def _mujoco_repository_impl(rctx):
    site = _site_packages(rctx)
    pkg = site.get_child("mujoco")
    libs = [f.basename for f in pkg.readdir() if f.basename.startswith("libmujoco.so")]
    if not libs:
        fail("%s has no libmujoco.so*" % pkg)
    assets = site.get_child("gymnasium").get_child("envs").get_child("mujoco").get_child("assets")
    if not assets.exists:
        fail("%s missing: run tools/setup.sh (gymnasium)" % assets)
    rctx.symlink(pkg.get_child("include"), "include")
    rctx.symlink(assets, "assets")
    rctx.file("SOURCE", "%s %s\n" % (pkg, sorted(libs)[0]))
    rctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

exports_files(["SOURCE"])

cc_library(
    name = "mujoco",
    hdrs = glob(["include/mujoco/*.h"]),
    includes = ["include"],
    linkopts = [
        "-L{dir}",
        "-Wl,-rpath,{dir}",
        "-l:{lib}",
    ],
)

exports_files(glob(["assets/*.xml"]))

filegroup(
    name = "gymnasium_assets",
    srcs = glob(["assets/*.xml"]),
)
""".format(dir = pkg, lib = sorted(libs)[0]))

mujoco_repository = repository_rule(
    implementation = _mujoco_repository_impl,
    environ = ["RL_VENV"],
    local = True,
)
