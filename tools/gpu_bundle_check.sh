#!/usr/bin/env bash
# Runs on the GPU machine, in a checkout, what tools/gpu_bundle.sh built:
#
#   bash BUNDLE_DIR/gpu_bundle_check.sh BUNDLE_DIR [REPORT_DIR [STEPS]]
#
# STEPS, an extended regular expression, picks the steps whose names match
# (default: all), e.g. 'cuda_test|profile'.
#
# 1. the machine's torch (must be the bundle's version) and GPU;
# 2. the unit tests whose CUDA branches run where a GPU is visible (the
#    runtime loader, device resolution, the acting and update self-checks'
#    comparisons, the packed transfer, a learner core on cuda) and the CUDA
#    kernels against their CPU loops;
# 3. bench/device_bench on the GPU (float32, graphed, bfloat16, copy
#    share), bench/cuda_env_bench (CartPole's kernels alone, 8192 to 1M
#    envs) and bench/device_collect_bench (envs, policy and update on the
#    GPU vs the host's envs, host synchronisations in the step loop);
# 4. rl_local on CartPole: updates on the CPU, on CUDA graphed (self-check
#    first), eager, in bfloat16, and envs and acting on CUDA too; then
#    examples/cartpole_gpu.yaml (8192 envs on the GPU), three seeds;
# 5. Chrome traces of 3 GPU-scale and 5 small CUDA updates
#    (REPORT_DIR/*.json.gz) and their summaries (tools/trace_summary.py).
# Every step runs even when one before it failed; exit 1 if any did.
set -uo pipefail
if (($# < 1 || $# > 3)); then
  sed -n '2,20p' "$0" >&2
  exit 2
fi
BUNDLE="$(realpath "$1")"
REPORT_DIR="$(realpath -m "${2:-gpu_report}")"
STEPS="${3:-.}"
mkdir -p "$REPORT_DIR"
REPORT="$REPORT_DIR/report.txt"
: >"$REPORT"
failed=()
step() { # step NAME COMMAND...
  local name="$1"
  shift
  [[ "$name" =~ $STEPS ]] || return 0
  echo "== $name" | tee -a "$REPORT"
  local start=$SECONDS
  if "$@" >>"$REPORT" 2>&1; then
    echo "-- $name: ok ($((SECONDS - start)) s)" | tee -a "$REPORT"
  else
    echo "-- $name: FAILED ($((SECONDS - start)) s)" | tee -a "$REPORT"
    tail -25 "$REPORT"
    failed+=("$name")
  fi
}

PY="${PYTHON:-python3}"
read -r TORCH_DIR TORCH_VERSION < <("$PY" -c \
  'import os, torch; print(os.path.dirname(torch.__file__), torch.__version__)')
WANT="$(cat "$BUNDLE/TORCH_VERSION")"
echo "torch here: $TORCH_VERSION at $TORCH_DIR; bundle built for $WANT" |
  tee -a "$REPORT"
if [[ "${TORCH_VERSION%%+*}" != "$WANT" ]]; then
  echo "the bundle needs torch $WANT here" | tee -a "$REPORT"
  exit 1
fi
# The binaries' RPATH names the torch they were linked with; it becomes
# this machine's torch (same version), CUDA wheels and all.
LINKED="$(cat "$BUNDLE/TORCH_LIB")"
if [[ -d "$LINKED" && ! -L "$LINKED" ]]; then
  echo "$LINKED is a real directory (the machine that built the bundle?):" \
    "run the bundle on the GPU machine" | tee -a "$REPORT"
  exit 1
fi
mkdir -p "$(dirname "$LINKED")" && ln -sfn "$TORCH_DIR/lib" "$LINKED" || exit 1
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TEST_TMPDIR="$(mktemp -d)"
B="$BUNDLE/bin"

step "device" nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv
for t in cuda_runtime_test compute_device_test device_act_check_test \
  device_transfer_test device_self_check_test batched_env_cuda_test \
  normalize_kernel_cuda_test; do
  step "$t" timeout 300 "$B/$t" --gtest_brief=1
done
step "learner_core_test (cuda)" timeout 300 "$B/learner_core_test" --gtest_brief=1 \
  --gtest_filter='*Cuda*:*Device*'
step "device_bench (cuda)" timeout 300 "$B/device_bench" --device=cuda --updates=5
[[ "device_bench (cuda)" =~ $STEPS ]] && tail -14 "$REPORT"
step "cuda_env_bench" timeout 120 "$B/cuda_env_bench"
[[ "cuda_env_bench" =~ $STEPS ]] && tail -6 "$REPORT"
# Envs, policy and update on the GPU (libcuda_envs.so beside the binary)
# beside the host's envs, 8192 and 65536 CartPole envs.
step "device_collect_bench" timeout 300 "$B/device_collect_bench" --device=cuda
[[ "device_collect_bench" =~ $STEPS ]] && tail -10 "$REPORT"
# Rollouts 4x larger (256 envs x 128 steps): minibatches of 8192 samples.
step "device_bench (cuda, 256 envs)" timeout 300 "$B/device_bench" \
  --device=cuda --updates=3 --envs=256
[[ "device_bench (cuda, 256 envs)" =~ $STEPS ]] && tail -8 "$REPORT"

WORK="$(mktemp -d)"
run_file() { # run_file NAME SED_EXPRESSION
  sed "$2" examples/cartpole.yaml >"$WORK/$1.yaml"
}
run_file profile 's/learner_device: cpu/learner_device: cuda/; s/total_env_steps: 200000/total_env_steps: 8192/; /^target_return/d'
run_file cpu 's/learner_device: cpu/learner_device: cpu/'
run_file cuda 's/learner_device: cpu/learner_device: cuda/'
run_file cuda_bf16 's/learner_device: cpu/learner_device: cuda/; s/^ppo:/execution:\n  precision: bfloat16\nppo:/'
run_file cuda_nographs 's/learner_device: cpu/learner_device: cuda/; s/^ppo:/execution:\n  cuda_graphs: "off"\nppo:/'
run_file cuda_both 's/learner_device: cpu/learner_device: cuda/; s/actor_device: cpu/actor_device: cuda/'
# precision auto is float32 for CartPole's MLP (bfloat16 is for CNNs), and
# cuda_graphs auto then captures the minibatch step (libcuda_graph.so beside
# rl_local): "cuda" is graphed, "cuda_nographs" is not.
for r in cpu cuda cuda_nographs cuda_bf16 cuda_both; do
  step "CartPole, $r" timeout 300 "$B/rl_local" train --run="$WORK/$r.yaml" \
    --run_dir="$WORK/run-$r" --progress=false
  [[ "CartPole, $r" =~ $STEPS ]] &&
    grep -h -i -E "solved|self-check|not solved|budget|cuda graph" "$REPORT" | tail -4
done
# GPU scale: 8192 CartPole envs stepping on the GPU with the policy, the
# update there too (examples/cartpole_gpu.yaml), three seeds.
for seed in 1 2 3; do
  sed "s/^seed: 1$/seed: $seed/" examples/cartpole_gpu.yaml >"$WORK/gpu$seed.yaml"
  step "CartPole at GPU scale, seed $seed" timeout 300 "$B/rl_local" train \
    --run="$WORK/gpu$seed.yaml" --run_dir="$WORK/run-gpu$seed" --progress=false
  [[ "CartPole at GPU scale, seed $seed" =~ $STEPS ]] &&
    grep -h -i -E "solved|self-check|not solved|budget|step on" "$REPORT" | tail -4
done
step "profile of 3 GPU-scale updates" timeout 300 "$B/rl_local" train \
  --run="$WORK/gpu1.yaml" --run_dir="$WORK/profile-gpu" --resume=false \
  --progress=false --profile=3 --profile_output="$REPORT_DIR/gpu_scale_profile.json"
if [[ -f "$REPORT_DIR/gpu_scale_profile.json" ]]; then
  step "trace summary (GPU scale)" "${PYTHON:-python3}" \
    "$(dirname "$0")/trace_summary.py" "$REPORT_DIR/gpu_scale_profile.json"
  gzip -f "$REPORT_DIR/gpu_scale_profile.json"
  [[ "trace summary (GPU scale)" =~ $STEPS ]] &&
    sed -n '/== trace summary (GPU scale)/,$p' "$REPORT" | head -30
fi
step "profile of 5 CUDA updates" timeout 300 "$B/rl_local" train \
  --run="$WORK/profile.yaml" --run_dir="$WORK/profile" --resume=false \
  --progress=false --profile=5 --profile_output="$REPORT_DIR/gpu_profile.json"
if [[ -f "$REPORT_DIR/gpu_profile.json" ]]; then
  step "trace summary" "${PYTHON:-python3}" "$(dirname "$0")/trace_summary.py" \
    "$REPORT_DIR/gpu_profile.json"
  gzip -f "$REPORT_DIR/gpu_profile.json"
  [[ "trace summary" =~ $STEPS ]] && sed -n '/== trace summary/,$p' "$REPORT"
fi

echo "== summary" | tee -a "$REPORT"
if ((${#failed[@]})); then
  printf 'FAILED: %s\n' "${failed[@]}" | tee -a "$REPORT"
  exit 1
fi
echo "all steps passed" | tee -a "$REPORT"
