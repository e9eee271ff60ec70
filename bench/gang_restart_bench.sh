#!/usr/bin/env bash
# Time from a learner rank's death to the gang training again, on the
# embedded system (coordinator + 2 local learners + 2 local actors):
#
#   bazel build --config=opt //coordinator:coordinator_main //learner:learner_main //actor:actor_main
#   bash bench/gang_restart_bench.sh [TRIALS]
#
# Each trial: a two-learner CartPole run trains; learner rank 1 gets SIGKILL;
# printed per trial: seconds until the coordinator requeued the gang, until
# the new gang formed (rank 0's "joining learner gang" line), and until the
# run's progress moved past the step count it resumed at (training again).
set -euo pipefail
TRIALS=${1:-3}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${RL_BIN_DIR:-$ROOT/bazel-bin}"
RLCTL="${RL_RLCTL:-$ROOT/.venv/bin/rlctl}"
DIR="$(mktemp -d /tmp/gang_restart.XXXXXX)"
COORD_PID=""
cleanup() {
  [[ -n "$COORD_PID" ]] && kill -TERM "$COORD_PID" 2>/dev/null && sleep 2
  [[ -n "$COORD_PID" ]] && kill -KILL "$COORD_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

"$BIN/coordinator/coordinator_main" --port=0 --port_file="$DIR/port" \
  --store="$DIR/c.db" --runs_dir="$DIR/runs" --log_dir="$DIR/logs" \
  --local_telemetry=false --lease_ttl_s=5 \
  --local_workers=learners=2,actors=2 >"$DIR/coordinator.log" 2>&1 &
COORD_PID=$!
for _ in $(seq 100); do [[ -s "$DIR/port" ]] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat "$DIR/port")"
export RL_TOKEN_FILE="$DIR/runs/auth/user.token"  # made by the coordinator
cat >"$DIR/run.yaml" <<'YAML'
name: gang-restart-bench
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: 100000000
ppo: {num_epochs: 4, num_minibatches: 4}
resources: {num_learners: 2, num_actors: 2}
checkpoint_interval: 5
YAML
run=$("$RLCTL" --coordinator "$ADDR" submit "$DIR/run.yaml" | awk '{print $NF}')
steps() { "$RLCTL" --coordinator "$ADDR" get "$run" 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="steps") print $(i+1)}' | head -1; }
printf "%-6s %10s %12s %16s\n" trial requeued gang_formed training_again
for trial in $(seq "$TRIALS"); do
  while (( $(steps || echo 0) < 5000 * trial )); do sleep 0.2; done
  joins_before=$(grep -c "joining learner gang" "$DIR/logs/local-learner-0.log" || true)
  restarts_before=$(grep -c "gang restart" "$DIR/coordinator.log" || true)
  pid=$(pgrep -f -- "--coordinator=$ADDR.*--worker_name=local-learner-1" | head -1)
  t0=$(now)
  kill -KILL "$pid"
  requeued="" formed="" resumed_at="" again=""
  while [[ -z "$again" ]]; do
    [[ -z "$requeued" ]] && (( $(grep -c "gang restart" "$DIR/coordinator.log" || true) > restarts_before )) && requeued=$(since "$t0")
    [[ -z "$formed" ]] && (( $(grep -c "joining learner gang" "$DIR/logs/local-learner-0.log" || true) > joins_before )) && formed=$(since "$t0")
    if [[ -n "$formed" ]]; then
      s=$(steps || echo 0)
      if [[ -z "$resumed_at" ]]; then resumed_at=$s
      elif (( s > resumed_at )); then again=$(since "$t0"); fi
    fi
    awk -v t="$(since "$t0")" 'BEGIN { exit !(t > 120) }' && { echo "trial $trial: no restart within 120 s"; exit 1; }
    sleep 0.1
  done
  printf "%-6s %9ss %11ss %15ss\n" "$trial" "$requeued" "$formed" "$again"
done
