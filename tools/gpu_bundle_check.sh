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
# 5. the service on the GPU (the embedded system, beside rl_local), a gang
#    of two learners on one device, real tasks (HalfCheetah-v5; Breakout
#    with actors on the CPU cores, the learner on the GPU) and a user's
#    device env (PixelBreakout-v0);
# 6. Chrome traces of 3 GPU-scale and 5 small CUDA updates
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
export RL_ATARI_ROM_DIR="$BUNDLE/roms"
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
# The service on the GPU: the embedded system (a coordinator starting
# telemetry and local learner and actor processes, all from this bundle)
# trains a run file submitted with rlctl, beside rl_local on the same file.
# PYTHONPATH: the client (python/, its stubs carried in python/rlservice/proto).
# RL_LOCAL=0 skips rl_local (a run rl_local would take too long for);
# RL_SERVICE_TIMEOUT bounds the service's run (default 240 s).
service_run() { # service_run NAME RUN_FILE LEARNERS ACTORS
  local dir="$WORK/service-$1" rate=0
  mkdir -p "$dir"
  if [[ "${RL_LOCAL:-1}" != 0 ]]; then
    timeout "${RL_LOCAL_TIMEOUT:-200}" "$B/rl_local" train --run="$2" --run_dir="$dir/rl_local" --progress=false \
      >"$dir/rl_local.log" 2>&1
    grep -E "steps/s|^time:" "$dir/rl_local.log" | sed 's/^/rl_local: /'
    rate="$(sed -n 's/.* \([0-9][0-9]*\) steps\/s.*/\1/p' "$dir/rl_local.log" | tail -1)"
  fi
  "$B/coordinator_main" --port=0 --port_file="$dir/port" \
    --telemetry_port_file="$dir/telemetry_port" \
    --telemetry_http_port_file="$dir/web_port" --store="$dir/coordinator.db" \
    --runs_dir="$dir" --log_dir="$dir/logs" \
    --local_workers="learners=$3,actors=$4" --learner_binary="$B/learner_main" \
    --actor_binary="$B/actor_main" --telemetry_binary="$B/telemetry_main" \
    >"$dir/coordinator.log" 2>&1 &
  local pid=$! status=0
  for _ in $(seq 300); do
    [[ -s "$dir/port" && -s "$dir/telemetry_port" ]] && break
    sleep 0.1
  done
  export RL_COORDINATOR="127.0.0.1:$(cat "$dir/port" 2>/dev/null)"
  export RL_TELEMETRY="127.0.0.1:$(cat "$dir/telemetry_port" 2>/dev/null)"
  export RL_TOKEN_FILE="$dir/auth/user.token"
  PYTHONPATH="$PWD/python" timeout "${RL_SERVICE_TIMEOUT:-240}" "$PY" python/rlctl.py submit "$2" --watch \
    >"$dir/rlctl.log" 2>&1 || status=$?
  tail -3 "$dir/rlctl.log"
  local run_id
  run_id="$(sed -n 's/^submitted \(run-[0-9]*\).*/\1/p' "$dir/rlctl.log" | head -1)"
  if [[ -n "$run_id" ]]; then
    sleep 2 # the workers' last points reach telemetry after the end report
    PYTHONPATH="$PWD/python" "$PY" "$(dirname "$0")/service_run_report.py" \
      "$run_id" --compare_steps_per_second="${rate:-0}" || status=1
  else
    status=1
  fi
  grep -h -i -E "self-check|step on|collective|gang|segments (go|reach)|error" \
    "$dir/logs/"*.log 2>/dev/null | sort -u | head -20
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ((status == 0)) || tail -n 20 "$dir/coordinator.log" "$dir/logs/"*.log
  return "$status"
}
step "service: CartPole at GPU scale through the embedded system" \
  service_run target examples/cartpole_gpu.yaml 1 1
[[ "service: CartPole at GPU scale" =~ $STEPS ]] && tail -12 "$REPORT"
# Steady state: a fixed budget of 40M steps, no target (start-up amortised).
sed 's/^total_env_steps: .*/total_env_steps: 40000000/; /^target_return/d' \
  examples/cartpole_gpu.yaml >"$WORK/service-budget.yaml"
step "service: 40M steps at GPU scale, no target" \
  service_run budget "$WORK/service-budget.yaml" 1 1
[[ "service: 40M steps" =~ $STEPS ]] && tail -12 "$REPORT"
# A gang on one device: two learner ranks on cuda:0 all-reduce through gloo
# (NCCL refuses two ranks on one device), two actors of 4096 envs each.
sed 's/^envs_per_actor: .*/envs_per_actor: 4096/; s/num_learners: 1/num_learners: 2/; s/num_actors: 1/num_actors: 2/; s/^ppo:$/execution:\n  collective_backend: gloo\nppo:/' \
  examples/cartpole_gpu.yaml >"$WORK/service-gang.yaml"
step "service: a gang of 2 learners on cuda:0 (gloo)" \
  service_run gang "$WORK/service-gang.yaml" 2 2
[[ "service: a gang of 2" =~ $STEPS ]] && tail -12 "$REPORT"

# A real task on the GPU box: HalfCheetah-v5 (the MuJoCo plugin, beside the
# binaries) stepped on the CPU, the update on the GPU, to its target of
# 3,000 (examples/mujoco/half_cheetah.yaml), rl_local and then the service.
sed 's/^checkpoint_interval: .*/resources: {learner_device: cuda, actor_device: cpu}\ncheckpoint_interval: 100/' \
  examples/mujoco/half_cheetah.yaml >"$WORK/half_cheetah.yaml"
step "service: HalfCheetah-v5 to 3000, actor on the CPU, learner on cuda" \
  service_run half_cheetah "$WORK/half_cheetah.yaml" 1 1
[[ "service: HalfCheetah" =~ $STEPS ]] && tail -12 "$REPORT"

# Atari on the GPU box (issue 49): the native plugin (libatari_envs.so beside
# the binaries, the bundle's ROMs) stepping Breakout in 12 actors of 8 envs
# on the CPU cores, the Nature CNN's update on the GPU, 2M steps or 300 s,
# whichever ends first: the return reached, beside CleanRL/EnvPool's
# (Breakout 10M steps in 35-40 min on one A100, ~400 points).
sed 's/^total_env_steps: .*/total_env_steps: 2000000/; s/^checkpoint_interval: .*/resources: {learner_device: cuda, actor_device: cpu, num_actors: 12}\ncheckpoint_interval: 100/' \
  examples/atari/breakout.yaml >"$WORK/breakout.yaml"
RL_LOCAL=0 RL_SERVICE_TIMEOUT=300 step \
  "service: Breakout, 12 actors on the CPU cores, learner on cuda" \
  service_run breakout "$WORK/breakout.yaml" 1 12
[[ "service: Breakout" =~ $STEPS ]] && tail -12 "$REPORT"

# A user's device env on the GPU (docs/device_envs.md): PixelBreakout-v0's
# CUDA kernels (libpixel_breakout.so beside the binaries, built with nvcc)
# step 1024 envs beside the Nature CNN, the update there too; its
# first-use self-check against the host build first. Time to the target of
# 8, rl_local and then the service (PufferLib 4: Breakout in 3-5 s).
sed 's/^envs_per_actor: .*/envs_per_actor: 1024/; s/^total_env_steps: .*/total_env_steps: 20000000/' \
  examples/device_env/pixel_breakout.yaml >"$WORK/pixel_breakout.yaml"
printf 'resources: {learner_device: cuda, actor_device: cuda}\n' \
  >>"$WORK/pixel_breakout.yaml"
step "device env: PixelBreakout-v0 on cuda, rl_local and the service" \
  service_run pixel_breakout "$WORK/pixel_breakout.yaml" 1 1
[[ "device env: PixelBreakout" =~ $STEPS ]] && tail -12 "$REPORT"

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
