#!/usr/bin/env bash
# The README's main-job command: set up (idempotent), build with
# optimisations, start the embedded system (a coordinator that spawns and
# supervises local learner and actor workers), train a run file through it
# with rlctl (live progress until the run ends), evaluate the checkpoint it
# leaves, and stop the system (with --keep, leave it up for rlctl and the web
# page: `source runs/embedded/env` points rlctl at it).
#
#   tools/train.sh [RUN_FILE] [--local_workers=learners=N,actors=M] [--keep]
#
# Without --local_workers, the system gets the workers the run file asks
# for (python/run_file_workers.py): resources.num_learners learners (times
# the policies with learner_per_policy), resources.num_actors actors; on a
# machine with several GPUs (those CUDA_VISIBLE_DEVICES names, else those
# nvidia-smi -L lists), spread over them (gpus=G).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN_FILE="examples/cartpole.yaml"
WORKERS=""
KEEP=0
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    --local_workers=*) WORKERS="$arg" ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "train.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *) RUN_FILE="$arg" ;;
  esac
done
bash tools/setup.sh
if [[ -z "$WORKERS" ]]; then
  # As runspec/run_spec.cc LearnerProcesses counts them.
  WORKERS="$(.venv/bin/python python/run_file_workers.py "$RUN_FILE")" ||
    WORKERS="--local_workers=learners=1,actors=1"
  # The GPUs this shell may use: its CUDA_VISIBLE_DEVICES, else all.
  if [[ -n "${CUDA_VISIBLE_DEVICES+set}" ]]; then
    GPUS="$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c . || true)"
  else
    GPUS="$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)"
  fi
  if [[ "$GPUS" -gt 1 ]]; then WORKERS="$WORKERS,gpus=$GPUS"; fi
  echo "workers for $RUN_FILE: ${WORKERS#--local_workers=}"
fi
bazel build --config=opt //coordinator:coordinator_main //learner:learner_main \
  //actor:actor_main //telemetry:telemetry_main //trainer:rl_local
BIN="$(bazel info --config=opt bazel-bin 2>/dev/null)"
STATE="$ROOT/runs/embedded"
mkdir -p "$STATE"
rm -f "$STATE/port" "$STATE/telemetry_port" "$STATE/web_port"
"$BIN/coordinator/coordinator_main" --port=0 --port_file="$STATE/port" \
  --telemetry_port_file="$STATE/telemetry_port" \
  --telemetry_http_port_file="$STATE/web_port" \
  --store="$STATE/coordinator.db" --runs_dir="$STATE" --log_dir="$STATE/logs" \
  "$WORKERS" >"$STATE/coordinator.log" 2>&1 &
COORDINATOR=$!
stop_system() { kill -TERM $COORDINATOR 2>/dev/null; wait $COORDINATOR 2>/dev/null || true; }
trap stop_system EXIT
for _ in $(seq 300); do
  [[ -s "$STATE/port" && -s "$STATE/telemetry_port" && -s "$STATE/web_port" ]] && break
  sleep 0.1
done
if [[ ! -s "$STATE/port" || ! -s "$STATE/telemetry_port" ]]; then
  echo "coordinator or telemetry did not start; see $STATE/coordinator.log and $STATE/logs" >&2
  exit 1
fi
export RL_COORDINATOR="127.0.0.1:$(cat "$STATE/port")"
export RL_TELEMETRY="127.0.0.1:$(cat "$STATE/telemetry_port")"
# The embedded coordinator made its tokens there (0600); rlctl sends the user's.
export RL_TOKEN_FILE="$STATE/auth/user.token"
echo "embedded system up: coordinator $RL_COORDINATOR, telemetry $RL_TELEMETRY (state and logs in $STATE)"
# The page's data needs the user's token too: it takes it from the URL.
echo "web page: http://127.0.0.1:$(cat "$STATE/web_port")/#token=$(cat "$RL_TOKEN_FILE")   TensorBoard event files: $STATE/tensorboard"
status=0
OUT="$(mktemp)"
.venv/bin/rlctl submit "$RUN_FILE" --watch | tee "$OUT" || status=$?
RUN_ID="$(sed -n 's/^submitted \(run-[0-9]*\).*/\1/p' "$OUT" | head -1)"
rm -f "$OUT"
if [[ -n "$RUN_ID" ]]; then
  # The learner's last points reach telemetry after its end report: wait
  # (at most 15 s) until they are stored, so the table ends where the run did.
  .venv/bin/python - "$RUN_ID" <<'PY' || true
import sys, time
from rlservice import Client, ClientError, TelemetryClient
run_id = sys.argv[1]
final = Client().get(run_id).progress.env_steps
telemetry = TelemetryClient()
deadline = time.monotonic() + 15
while time.monotonic() < deadline:
    try:
        steps = [p.step for s in telemetry.raw_series(run_id, names=["learner/policy_version"])
                 for p in s.points]
    except ClientError:
        steps = []
    if steps and max(steps) >= final:
        break
    time.sleep(0.2)
PY
  echo "metrics of $RUN_ID (rlctl metrics $RUN_ID shows every series):"
  .venv/bin/rlctl metrics "$RUN_ID" --name learner/mean_return \
    --name learner/steps_per_second --buckets 5 || true
fi
if [[ -n "$RUN_ID" && -d "$STATE/$RUN_ID/checkpoints" ]]; then
  "$BIN/trainer/rl_local" eval --run="$RUN_FILE" --checkpoint="$STATE/$RUN_ID" \
    --episodes=100
fi
if [[ "$KEEP" == 1 ]]; then
  cat >"$STATE/env" <<ENV
export RL_COORDINATOR=$RL_COORDINATOR
export RL_TELEMETRY=$RL_TELEMETRY
export RL_TOKEN_FILE=$RL_TOKEN_FILE
ENV
  trap - EXIT
  echo "the system stays up (pid $COORDINATOR): 'source runs/embedded/env' points rlctl at it"
  echo "(.venv/bin/rlctl metrics ${RUN_ID:-RUN_ID}, .venv/bin/rlctl top); stop it with: kill $COORDINATOR"
else
  echo "system stopped; 'tools/train.sh --keep' leaves it up for rlctl and the web page"
fi
exit "$status"
