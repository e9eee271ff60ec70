#!/usr/bin/env bash
# Learners and actors on two "hosts": two network namespaces joined by a veth
# pair (made here and removed on exit), so that nothing can rely on
# 127.0.0.1. Host A runs the coordinator and learner rank 0; host B runs
# learner rank 1 and both actors. Every worker listens on 0.0.0.0 and
# advertises its host's address (--advertise_address); the gang meets at
# rank 0's TCPStore on host A, gloo connects across the veth, each actor
# streams to its rank across it, and the run (CartPole, num_learners: 2)
# must SUCCEED.
#
#   bash tests/multihost_test.sh          # after building the binaries; root
#   bazel test --config=long //tests:multihost_test
#
# Environment: RL_BIN_DIR, RL_RLCTL (default: bazel-bin, .venv/bin/rlctl),
# RL_MULTIHOST_TIMEOUT (seconds, default 300).
set -euo pipefail

T0=$SECONDS
DEADLINE=$((T0 + ${RL_MULTIHOST_TIMEOUT:-300}))
say() { printf '[multihost_test %3ds] %s\n' "$((SECONDS - T0))" "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  source "$TEST_SRCDIR/${TEST_WORKSPACE:-rl_service}/tests/two_hosts.sh"
else
  source "$(dirname "${BASH_SOURCE[0]}")/two_hosts.sh"
fi
two_hosts_up multihost 10.254 coordinator/coordinator_main \
  learner/learner_main actor/actor_main

in_ns "$NS_A" coordinator.log "$BIN/coordinator/coordinator_main" \
  --host=0.0.0.0 --insecure --port=50051 --store="$DIR/c.db" \
  --runs_dir="$DIR/runs" \
  --local_workers= --local_telemetry=false --lease_ttl_s=5
COORD="$ADDR_A:50051"
# Plaintext between the namespaces (--insecure): without it a server refuses
# to listen beyond loopback (common/security_test covers TLS and tokens).
common=(--coordinator="$COORD" --host=0.0.0.0 --insecure)
in_ns "$NS_A" learner0.log "$BIN/learner/learner_main" "${common[@]}" \
  --worker_name=learner-0 --advertise_address="$ADDR_A"
in_ns "$NS_B" learner1.log "$BIN/learner/learner_main" "${common[@]}" \
  --worker_name=learner-1 --advertise_address="$ADDR_B"
# The namespaces share one kernel, so an actor could hand the learner beside
# it its segments through shared memory; the point here is the wire, so the
# actors send bytes (--shared_memory=false).
for i in 0 1; do
  in_ns "$NS_B" "actor$i.log" "$BIN/actor/actor_main" --coordinator="$COORD" \
    --worker_name="actor-$i" --advertise_address="$ADDR_B" --insecure \
    --shared_memory=false
done

rlctl() { ip netns exec "$NS_A" "$RLCTL" --insecure --coordinator 127.0.0.1:50051 "$@"; }
say "waiting for 4 workers to register"
while :; do
  n=$(rlctl workers 2>/dev/null | grep -cE 'learner-[01]|actor-[01]' || true)
  ((n >= 4)) && break
  ((SECONDS < DEADLINE)) || fail "workers did not register (saw $n)"
  sleep 0.5
done

cat >"$DIR/run.yaml" <<'YAML'
name: multihost
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 32
total_env_steps: 16384
seed: 3
ppo: {learning_rate: 1.0e-3, num_epochs: 4, num_minibatches: 1}
resources: {num_learners: 2, num_actors: 2}
checkpoint_interval: 5
YAML
say "submitting a run with 2 learners and 2 actors"
run_id=$(rlctl submit "$DIR/run.yaml" | awk '{print $NF}')
[[ "$run_id" == run-* ]] || fail "submit printed no run id"
# The operator's view while it runs: the gang's placement across the hosts.
while :; do
  rlctl get "$run_id" >"$DIR/get.txt" 2>&1 || true
  grep -q "learner rank 1/2 .*learner-1 .*$ADDR_B:" "$DIR/get.txt" &&
    grep -q "learner rank 0/2 .*learner-0 .*$ADDR_A:" "$DIR/get.txt" && break
  ((SECONDS < DEADLINE)) || { cat "$DIR/get.txt"; fail "no placement shown"; }
  sleep 0.5
done
sed 's/^/  /' "$DIR/get.txt"
set +e
timeout $((DEADLINE - SECONDS)) \
  ip netns exec "$NS_A" "$RLCTL" --coordinator 127.0.0.1:50051 \
  watch "$run_id" >"$DIR/rlctl.log" 2>&1
rc=$?
set -e
tail -n 2 "$DIR/rlctl.log"
((rc == 0)) || fail "rlctl watch exited $rc"
grep -q "SUCCEEDED" "$DIR/rlctl.log" || fail "the run did not succeed"

# The gang really spanned the hosts: rank 1 on host B joined rank 0's store
# on host A, and the actors streamed to both learners' advertised addresses.
grep -q "joining learner gang .* as rank 1 of 2 at $ADDR_A:" "$DIR/learner1.log" ||
  fail "learner-1 did not join the gang at $ADDR_A"
grep -q "learner $ADDR_A:" "$DIR/actor0.log" "$DIR/actor1.log" ||
  fail "no actor streamed to $ADDR_A"
grep -q "learner $ADDR_B:" "$DIR/actor0.log" "$DIR/actor1.log" ||
  fail "no actor streamed to $ADDR_B"
if grep -h "127.0.0.1" "$DIR"/learner*.log "$DIR"/actor*.log | grep -q "learner\|gang"; then
  fail "a worker used 127.0.0.1 across hosts"
fi
say "PASS: run SUCCEEDED across two namespaces (rank 1 on $ADDR_B, store on $ADDR_A)"
