#!/usr/bin/env bash
# One command on a GPU machine: the GPU path checked end to end, one report.
#
#   tools/gpu_check.sh [REPORT_FILE]      (default gpu_check_report.txt)
#
# 1. set-up with --gpu (LibTorch's CUDA 12.8 runtime wheels, pinned);
# 2. the GPU's description (nvidia-smi);
# 3. the tests tagged `cuda` (the CUDA env and normaliser kernels against
#    their CPU loops; with two GPUs, the NCCL collectives of a learner
#    gang), built with --config=cuda;
# 4. rl_local on CartPole with learner_device: cuda: the first-use self-check
#    (one PPO update on the CPU and on the GPU, compared, its minibatch
#    steps through a CUDA graph), then training to CartPole's target, beside
#    the same run on the CPU and on CUDA without graphs (steps/s of each);
# 5. bench/device_bench on the GPU (float32, graphed and bfloat16 updates,
#    the share of the host-to-device copy) and bench/device_collect_bench
#    (envs, policy and update on the GPU vs the host's envs; host
#    synchronisations in the step loop); CartPole at GPU scale
#    (examples/cartpole_gpu.yaml: 8192 envs on the GPU), three seeds;
# 6. a Chrome trace of 5 CUDA updates (--profile), for Perfetto.
# Every step runs even when one before it failed; the report says which
# failed, and the exit code is 1 if any did.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
REPORT="$(realpath -m "${1:-gpu_check_report.txt}")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
: >"$REPORT"
failed=()
step() {  # step NAME COMMAND...: runs it, its output into the report
  local name="$1"
  shift
  echo "== $name" | tee -a "$REPORT"
  if "$@" 2>&1 | tee -a "$REPORT"; then
    echo "-- $name: ok" | tee -a "$REPORT"
  else
    echo "-- $name: FAILED" | tee -a "$REPORT"
    failed+=("$name")
  fi
}

step "set-up --gpu" bash tools/setup.sh --gpu
step "device" nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv
step "cuda tests" bazel test --config=cuda --test_tag_filters=cuda \
  --test_output=all //envs:batched_env_cuda_test \
  //policy:normalize_kernel_cuda_test
# NCCL takes one device per rank: the gang test needs two GPUs.
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)"
if ((gpus >= 2)); then
  step "NCCL gang of two learners' collectives (2 GPUs)" bazel test \
    --config=cuda --test_tag_filters=cuda --test_output=all \
    //learner:nccl_collective_test
else
  echo "== NCCL gang test: not run (it needs 2 GPUs; $gpus visible)" |
    tee -a "$REPORT"
fi
step "build rl_local, the benches and the CUDA graph, env and NCCL libraries" \
  bazel build --config=opt --config=cuda //trainer:rl_local \
  //bench:device_bench //bench:device_collect_bench //learner:libcuda_graph.so \
  //learner:libnccl_backend.so //envs:libcuda_envs.so
RL_LOCAL="$ROOT/bazel-bin/trainer/rl_local"
step "update bench: float32, graphed and bfloat16 on the GPU, copy share" \
  "$ROOT/bazel-bin/bench/device_bench" --device=cuda
step "envs + policy + update on the GPU vs the host's envs (8192, 65536)" \
  "$ROOT/bazel-bin/bench/device_collect_bench" --device=cuda

# The tuned CartPole run file, on each device.
for device in cpu cuda; do
  sed "s/learner_device: cpu/learner_device: $device/" examples/cartpole.yaml \
    >"$WORK/cartpole-$device.yaml"
done
step "CartPole, updates on the CPU" "$RL_LOCAL" train \
  --run="$WORK/cartpole-cpu.yaml" --run_dir="$WORK/cpu" --progress=false
step "CartPole, updates on CUDA (self-check first)" "$RL_LOCAL" train \
  --run="$WORK/cartpole-cuda.yaml" --run_dir="$WORK/cuda" --progress=false
# The same without CUDA graphs (execution.cuda_graphs: auto takes them above).
sed 's/^ppo:$/execution:\n  cuda_graphs: "off"\nppo:/' "$WORK/cartpole-cuda.yaml" \
  >"$WORK/cartpole-cuda-nographs.yaml"
step "CartPole, updates on CUDA without CUDA graphs" "$RL_LOCAL" train \
  --run="$WORK/cartpole-cuda-nographs.yaml" --run_dir="$WORK/cuda-nographs" \
  --progress=false
for seed in 1 2 3; do
  sed "s/^seed: 1$/seed: $seed/" examples/cartpole_gpu.yaml >"$WORK/gpu$seed.yaml"
  step "CartPole at GPU scale (8192 envs on the GPU), seed $seed" "$RL_LOCAL" \
    train --run="$WORK/gpu$seed.yaml" --run_dir="$WORK/gpu$seed" --progress=false
done
step "profile of 5 CUDA updates" "$RL_LOCAL" train \
  --run="$WORK/cartpole-cuda.yaml" --run_dir="$WORK/profile" --resume=false \
  --progress=false --profile=5 --profile_output="$ROOT/gpu_profile.json"

echo "== summary" | tee -a "$REPORT"
if ((${#failed[@]})); then
  printf 'FAILED: %s\n' "${failed[@]}" | tee -a "$REPORT"
  echo "report: $REPORT" >&2
  exit 1
fi
echo "all steps passed; report: $REPORT; trace: $ROOT/gpu_profile.json" |
  tee -a "$REPORT"
