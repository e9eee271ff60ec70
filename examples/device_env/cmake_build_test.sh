#!/usr/bin/env bash
# The device env example as a user's own repository would have it: its
# folder and the four plugin_api headers copied outside this tree, built
# with its own CMakeLists.txt (no Bazel): the host build checked with
# rl_local check-env and trained by rl_local for 8 updates; and,
# where nvcc is found (the PATH, /usr/local/cuda), the CUDA build (the same file through nvcc),
# whose library must carry the kernels and still step on the host.
set -euo pipefail
RUNFILES="${TEST_SRCDIR:-$PWD/..}/rl_service"
[[ -d "$RUNFILES" ]] || RUNFILES="$PWD"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/pixel_breakout_repo.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/repo/third_party"
cp "$RUNFILES/examples/device_env/pixel_breakout.cc" \
   "$RUNFILES/examples/device_env/pixel_breakout.cu" \
   "$RUNFILES/examples/device_env/CMakeLists.txt" \
   "$RUNFILES/examples/device_env/pixel_breakout.yaml" "$TMP/repo/"
for h in rl_env_plugin.h rl_env_plugin.hpp rl_device_env.h rl_device_env.hpp; do
  cp "$RUNFILES/envs/plugin_api/$h" "$TMP/repo/third_party/"
done
# The run file names the bundled library; this one is the user's own.
sed -i 's/^  plugin: pixel_breakout$/  plugin: libpixel_breakout.so/' \
  "$TMP/repo/pixel_breakout.yaml"
grep -q 'plugin: libpixel_breakout.so' "$TMP/repo/pixel_breakout.yaml"
# A short run: this test is about the library built outside the tree
# loading, stepping and training; that PixelBreakout learns to the run
# file's target is //tests:device_env_test's (through the service) and
# took this test another 290 s.
sed -i -e 's/^total_env_steps: .*$/total_env_steps: 16384/' \
  -e '/^target_return:/d' "$TMP/repo/pixel_breakout.yaml"
grep -q '^total_env_steps: 16384$' "$TMP/repo/pixel_breakout.yaml"

build() {  # build DIR [cmake options...]
  local dir="$1"
  shift
  cmake -S "$TMP/repo" -B "$dir" -DRL_PLUGIN_API_DIR="$TMP/repo/third_party" \
    "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  cmake --build "$dir" >>"$dir.log" 2>&1 || { cat "$dir.log"; exit 1; }
  # Only the entry point is exported.
  local exported
  exported="$(nm -D --defined-only "$dir/libpixel_breakout.so" | awk '$2 == "T" {print $3}')"
  [[ "$exported" == "rl_device_env_v1" ]] || { echo "exports: $exported"; exit 1; }
}

build "$TMP/host" -DRL_DEVICE_ENV_CUDA=OFF
grep -q "pixel_breakout: host build only" "$TMP/host.log"

RL_LOCAL="$RUNFILES/trainer/rl_local"
export RL_ENV_PLUGIN_PATH="$TMP/host"
"$RL_LOCAL" check-env --run="$TMP/repo/pixel_breakout.yaml" --steps=2000 | tee "$TMP/check.txt"
grep -q "no violation found" "$TMP/check.txt"
"$RL_LOCAL" train --run="$TMP/repo/pixel_breakout.yaml" --run_dir="$TMP/run" \
  --progress=false | tee "$TMP/train.txt"
grep -q "^finished after 16384 steps" "$TMP/train.txt"
grep -q "^checkpoint: $TMP/run/checkpoints/ckpt-" "$TMP/train.txt"

NVCC="$(command -v nvcc || true)"
[[ -n "$NVCC" || ! -x /usr/local/cuda/bin/nvcc ]] || NVCC=/usr/local/cuda/bin/nvcc
if [[ -n "$NVCC" ]]; then
  build "$TMP/cuda" -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=80
  grep -q "pixel_breakout: host and CUDA builds" "$TMP/cuda.log"
  nm -C "$TMP/cuda/libpixel_breakout.so" >"$TMP/cuda_symbols.txt"
  grep -q "RowsKernel<" "$TMP/cuda_symbols.txt" ||
    { echo "the CUDA build has no RowsKernel"; exit 1; }
  # Without a GPU its host build steps as the other's did.
  export RL_ENV_PLUGIN_PATH="$TMP/cuda"
  "$RL_LOCAL" check-env --run="$TMP/repo/pixel_breakout.yaml" --steps=2000 2>&1 |
    tee "$TMP/check_cuda.txt"
  grep -q "host and CUDA builds" "$TMP/check_cuda.txt"
  grep -q "no violation found" "$TMP/check_cuda.txt"
  echo "PASS: host and CUDA builds with CMake outside the tree, checked, trained"
else
  echo "PASS: host build with CMake outside the tree, checked, trained (no nvcc: the CUDA build was not tried)"
fi
