"""ALE (the Arcade Learning Environment) in C++, built offline.

tools/setup.sh unpacks ale-py 0.10.1's source distribution (PyPI, its
sha256 pinned) into .venv/opt/ale_py-0.10.1; the installed ale-py wheel
(tools/requirements.txt) holds the ROMs. This rule links both into the
repository and builds the emulator (src/ale without its Python module and
SDL), as ALE's CMake would with SDL off.

Targets: @ale//:ale (the library: ale/ale_interface.hpp),
@ale//:roms (the wheel's ROMs, roms/<game>.bin), @ale//:rom_dir
(ale_rom_dir.h: RL_ALE_ROM_DIR, the ROMs' directory on this machine).
"""

_VERSION = "0.10.1"

def _venv(rctx):
    venv = rctx.os.environ.get("RL_VENV")
    if not venv:
        venv = str(rctx.path(Label("//:WORKSPACE")).dirname) + "/.venv"
    return venv

def _ale_repository_impl(rctx):
    venv = _venv(rctx)
    src = rctx.path(venv + "/opt/ale_py-%s/src/ale" % _VERSION)
    if not src.exists:
        fail("%s missing: run tools/setup.sh, which fetches ale-py %s's source" % (src, _VERSION))
    roms = None
    lib = rctx.path(venv + "/lib")
    if lib.exists:
        for py in lib.readdir():
            candidate = py.get_child("site-packages").get_child("ale_py").get_child("roms")
            if candidate.exists:
                roms = candidate
    if roms == None:
        fail("the ale-py wheel's ROMs not found in %s: run tools/setup.sh" % venv)
    rctx.symlink(src, "src/ale")
    rctx.symlink(roms, "roms")
    # Where the wheel's ROMs are on this machine: the native Atari plugin's
    # default ROM directory.
    rctx.file("rom_dir/ale_rom_dir.h", "#define RL_ALE_ROM_DIR \"%s\"\n" % roms)
    major, minor, patch = _VERSION.split(".")
    rctx.template("version/version.hpp", src.get_child("version.hpp.in"), {
        "@ALE_VERSION@": _VERSION,
        "@ALE_VERSION_MAJOR@": major,
        "@ALE_VERSION_MINOR@": minor,
        "@ALE_VERSION_PATCH@": patch,
        "@ALE_VERSION_GIT_SHA@": "sdist",
    })
    rctx.file("BUILD", rctx.read(Label("//third_party/ale:ale.BUILD")))

ale_repository = repository_rule(
    implementation = _ale_repository_impl,
    environ = ["RL_VENV"],
    local = True,
)
