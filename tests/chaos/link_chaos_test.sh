#!/usr/bin/env bash
# Link chaos: the coordinator and the learner on "host" A, two actors on
# "host" B (network namespaces joined by a veth pair, made here and removed
# on exit; `tc netem` is not available, so a cut is the link set down).
# While a CartPole run trains, a seeded schedule cuts the link for 1 to 6 s
# at a time (longer than the 3 s worker lease: the coordinator loses the
# actors and must take them back), up to RL_LINK_CUTS times. Afterwards:
#   - the run SUCCEEDED with its step budget;
#   - its segment ledger (learner/segment_ledger.h) has no segment used
#     twice and no gap, and its segments hold the run's steps;
#   - every segment the actors saw acknowledged (they report it when they
#     stop) was used or dropped by the learner: none acknowledged then lost.
# It prints its figures: cuts, seconds cut, invariants checked and violated.
#
#   bazel test --config=long //tests:link_chaos_test --test_output=all
#
# Environment: RL_BIN_DIR, RL_RLCTL (outside Bazel), RL_LINK_CUTS (6),
# RL_LINK_SEED (20261124), RL_LINK_CHAOS_TIMEOUT (seconds, 360). Root.
set -euo pipefail

T0=$SECONDS
DEADLINE=$((T0 + ${RL_LINK_CHAOS_TIMEOUT:-360}))
CUTS=${RL_LINK_CUTS:-6}
SEED=${RL_LINK_SEED:-20261124}
say() { printf '[link_chaos_test %3ds] %s\n' "$((SECONDS - T0))" "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  source "$TEST_SRCDIR/${TEST_WORKSPACE:-rl_service}/tests/two_hosts.sh"
else
  source "$(dirname "${BASH_SOURCE[0]}")/../two_hosts.sh"
fi
two_hosts_up link_chaos 10.253 coordinator/coordinator_main \
  learner/learner_main actor/actor_main learner/segment_ledger_audit

in_ns "$NS_A" coordinator.log "$BIN/coordinator/coordinator_main" \
  --host=0.0.0.0 --insecure --port=50051 --store="$DIR/c.db" \
  --runs_dir="$DIR/runs" --local_workers= --local_telemetry=false \
  --lease_ttl_s=3 --max_worker_failures=1000
COORD="$ADDR_A:50051"
common=(--coordinator="$COORD" --host=0.0.0.0 --insecure)
in_ns "$NS_A" learner0.log "$BIN/learner/learner_main" "${common[@]}" \
  --worker_name=learner-0 --advertise_address="$ADDR_A"
for i in 0 1; do
  in_ns "$NS_B" "actor$i.log" "$BIN/actor/actor_main" --coordinator="$COORD" \
    --worker_name="actor-$i" --advertise_address="$ADDR_B" --insecure
done

rlctl() { ip netns exec "$NS_A" "$RLCTL" --insecure --coordinator 127.0.0.1:50051 "$@"; }
say "waiting for 3 workers to register"
while :; do
  n=$(rlctl workers 2>/dev/null | grep -cE 'learner-0|actor-[01]' || true)
  ((n >= 3)) && break
  ((SECONDS < DEADLINE)) || fail "workers did not register (saw $n)"
  sleep 0.5
done

STEPS=1048576  # ~30-60 s of training here: long enough for the cuts
cat >"$DIR/run.yaml" <<YAML
name: link-chaos
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: $STEPS
seed: 5
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 1}
resources: {num_actors: 2}
checkpoint_interval: 20
YAML
run_id=$(rlctl submit "$DIR/run.yaml" | awk '{print $NF}')
[[ "$run_id" == run-* ]] || fail "submit printed no run id"
say "submitted $run_id; cutting the link $CUTS times (seed $SEED)"

# rlctl get's first line: "<run id>  <STATE>  <name>  <env>  steps <N> ...".
state() { rlctl get "$run_id" 2>/dev/null | awk 'NR == 1 {print $2}'; }
ended() { [[ "$(state)" =~ ^(SUCCEEDED|FAILED|CANCELLED)$ ]]; }

RANDOM=$SEED
cuts=0
down_total=0
longest=0
while ((cuts < CUTS)) && ((SECONDS < DEADLINE)); do
  up=$((1 + RANDOM % 4))   # 1..4 s of link between cuts
  down=$((1 + RANDOM % 6)) # 1..6 s cut
  sleep "$up"
  ended && break
  ip -n "$NS_A" link set "$VETH_A" down
  sleep "$down"
  ip -n "$NS_A" link set "$VETH_A" up
  cuts=$((cuts + 1))
  down_total=$((down_total + down))
  ((down > longest)) && longest=$down
  say "cut $cuts: link down ${down} s"
done

say "waiting for the run to end"
while ! ended; do
  ((SECONDS < DEADLINE)) || {
    rlctl get "$run_id" || true
    fail "the run did not end in time"
  }
  sleep 1
done
rlctl get "$run_id" >"$DIR/get.txt" 2>&1 || true
sed 's/^/  /' "$DIR/get.txt"

checked=0
violated=0
check() {
  checked=$((checked + 1))
  if ! eval "$1"; then
    violated=$((violated + 1))
    say "invariant violated: $2"
  fi
}
check '[[ "$(state)" == SUCCEEDED ]]' "the run ended $(state)"
LEDGER="$DIR/runs/$run_id/segments.rank0.log"
audit_rc=0
# The actors report, when they stop, what they saw acknowledged.
"$BIN/learner/segment_ledger_audit" "$LEDGER" --run_id="$run_id" \
  --actor_log="$DIR/actor0.log" --actor_log="$DIR/actor1.log" \
  >"$DIR/audit.txt" 2>&1 || audit_rc=$?
sed 's/^/  /' "$DIR/audit.txt"
check '((audit_rc == 0))' "the segment ledger has violations (see above)"
reports=$(sed -n 's/^actor reports \([0-9]*\),.*/\1/p' "$DIR/audit.txt")
check '(( ${reports:-0} >= 2 ))' "only ${reports:-0} actor reports of acknowledged segments"
segments=$(sed -n 's/.* segments \([0-9]*\),.*/\1/p' "$DIR/audit.txt" | head -1)
run_steps=$(awk 'NR == 1 {for (i = 1; i < NF; i++) if ($i == "steps") print $(i + 1)}' "$DIR/get.txt")
check '(( ${run_steps:-0} >= STEPS ))' "the run reached ${run_steps:-0} of $STEPS steps"
check '(( ${segments:-0} * 256 == ${run_steps:-0} ))' \
  "the ledger's ${segments:-0} segments hold $((${segments:-0} * 256)) env steps; the run counted ${run_steps:-0}"

echo
echo "link chaos figures (seed $SEED)"
printf '  runs                  1\n'
printf '  link cuts             %d (%d s down in all, longest %d s)\n' \
  "$cuts" "$down_total" "$longest"
# A cut longer than the lease loses the actors; each is assigned again.
assignments=$(cat "$DIR"/actor*.log | grep -c "assigned run" || true)
printf '  actor assignments     %d (2 without lost leases)\n' "$assignments"
printf '  runs succeeded        %d of 1\n' "$([[ "$(state)" == SUCCEEDED ]] && echo 1 || echo 0)"
printf '  segments used         %s, none twice\n' "${segments:-0}"
printf '  actor reports         %s (%s)\n' "${reports:-0}" \
  "$(sed -n 's/^actor reports [0-9]*, \(.*\)/\1/p' "$DIR/audit.txt")"
printf '  invariants checked    %d\n' "$checked"
printf '  invariants violated   %d\n' "$violated"
((cuts >= 2)) || fail "only $cuts cuts before the run ended"
((violated == 0)) || fail "$violated invariants violated"
say "PASS"
