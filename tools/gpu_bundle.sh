#!/usr/bin/env bash
# The GPU checks for a GPU machine that can neither download nor build
# (no network, no Bazel): build here against the torch that machine has,
# gather what the binaries need, and run tools/gpu_bundle_check.sh there.
#
#   tools/gpu_bundle.sh TORCH_VERSION BUNDLE_DIR      e.g. 2.11.0 .gpu
#   (copy BUNDLE_DIR and the checkout there, then, in the checkout)
#   bash BUNDLE_DIR/gpu_bundle_check.sh BUNDLE_DIR REPORT_DIR
#
# The binaries link the CPU half of LibTorch TORCH_VERSION (downloaded here
# once, headers and libraries only) and, at run time, the GPU machine's own
# torch of that version with its CUDA wheels (policy/cuda_runtime.h), so
# nothing of CUDA travels. libcuda_graph.so (execution.cuda_graphs) compiles
# against the CUDA toolkit here where its version is the one that torch was
# built for (torch 2.11.0 and CUDA 13.0), and travels beside the binaries. Debian's libraries they need (gRPC, protobuf,
# Abseil, spdlog, SQLite...) travel in BUNDLE_DIR/lib.
# Builds under its own --output_base: the main cache stays the pinned torch's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if (($# != 2)); then
  sed -n '2,15p' "$0" >&2
  exit 2
fi
VERSION="$1"
BUNDLE="$(realpath -m "$2")"
CACHE="${RL_GPU_BUNDLE_CACHE:-$HOME/.cache/rl-gpu-bundle/torch-$VERSION}"
PY="$ROOT/.venv/bin/python3"
[[ -x "$PY" ]] || bash tools/setup.sh

if [[ ! -f "$CACHE/torch/lib/libtorch_cpu.so" ]]; then
  echo "[gpu_bundle] torch==$VERSION's headers and libraries into $CACHE"
  mkdir -p "$CACHE/wheel"
  "$PY" -m pip download -q --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 -d "$CACHE/wheel" "torch==$VERSION"
  (cd "$CACHE" && unzip -q -o wheel/torch-*.whl 'torch/include/*' \
    'torch/lib/*' 'torch/version.py')
fi

TARGETS=(//trainer:rl_local //bench:device_bench //bench:cuda_env_bench
  //policy:cuda_runtime_test //policy:compute_device_test
  //policy:device_act_check_test //policy:device_transfer_test
  //learner:device_self_check_test //learner:learner_core_test
  //envs:batched_env_cuda_test //policy:normalize_kernel_cuda_test
  //learner:libcuda_graph.so //envs:libcuda_envs.so
  //bench:device_collect_bench //coordinator:coordinator_main
  //learner:learner_main //actor:actor_main //telemetry:telemetry_main
  //envs/mujoco:libmujoco_envs.so //examples/device_env:libpixel_breakout.so
  //envs/atari:libatari_envs.so)
OUTPUT_BASE="${RL_GPU_BUNDLE_OUTPUT_BASE:-$CACHE/bazel}"
echo "[gpu_bundle] building ${#TARGETS[@]} targets against torch $VERSION"
LIBTORCH="$CACHE/torch" bazel --output_base="$OUTPUT_BASE" build \
  --config=opt --config=cuda --symlink_prefix=/ "${TARGETS[@]}"
BIN="$(LIBTORCH="$CACHE/torch" bazel --output_base="$OUTPUT_BASE" info \
  --config=opt --config=cuda bazel-bin 2>/dev/null)"

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
for t in "${TARGETS[@]}"; do
  path="${t#//}"
  strip -o "$BUNDLE/bin/${path##*:}" "$BIN/${path%%:*}/${path##*:}"
done
# What the binaries load that is neither torch's (nor, as torch >= 2.10's
# libtorch_cpu needs libcudart and libcupti, CUDA's: torch's own wheels
# give those there), the C/C++ runtime's nor the driver's.
# Tests link Bazel's per-library .so files (_solib): those travel too.
for t in "${TARGETS[@]}"; do
  path="${t#//}"
  ldd "$BIN/${path%%:*}/${path##*:}"
done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -e "$CACHE/torch/" -e '/libc\.so' -e '/libm\.so' -e '/libstdc++' \
    -e '/libgcc_s' -e '/ld-linux' -e '/libpthread' -e '/libdl\.so' \
    -e '/librt\.so' -e '/libcuda\.so' -e '/libcudart' -e '/libcupti' \
    -e '/cuda' |
  while read -r lib; do cp -L "$lib" "$BUNDLE/lib/"; done
# The Atari plugin's ROMs (the GPU machine has no ale-py): the pinned wheel's
# Breakout and Pong, found there through RL_ATARI_ROM_DIR.
ROMS="$("$PY" -c 'import ale_py, os; print(os.path.dirname(ale_py.__file__))')/roms"
mkdir -p "$BUNDLE/roms"
cp "$ROMS/breakout.bin" "$ROMS/pong.bin" "$BUNDLE/roms/"
echo "$CACHE/torch/lib" >"$BUNDLE/TORCH_LIB"
echo "$VERSION" >"$BUNDLE/TORCH_VERSION"
cp tools/gpu_bundle_check.sh tools/trace_summary.py tools/service_run_report.py \
  "$BUNDLE/"
echo "[gpu_bundle] $BUNDLE: $(du -sh "$BUNDLE" | cut -f1)" \
  "($(ls "$BUNDLE/bin" | wc -l) binaries, $(ls "$BUNDLE/lib" | wc -l) libraries)"
