#!/usr/bin/env bash
# A real Slurm on this machine runs deploy/slurm/rl_job.sbatch end to end.
#
#   bash deploy/slurm/slurm_test.sh         # after the README's build, as root
#   bazel test //deploy/slurm:slurm_test    # the same, binaries from Bazel
#
# It starts, as background processes in their foreground modes and with
# everything (keys, sockets, conf, state, spool, logs) under one temporary
# directory: munged, slurmctld and two slurmd (nodes n1 and n2 on distinct
# ports of 127.0.0.1: a heterogeneous job needs two nodes; Debian's slurmd
# takes -N NODENAME). It submits the sbatch script with a small CartPole run
# (deploy/slurm/cartpole_slurm.yaml), waits until the run has a checkpoint,
# sends the batch shell SIGUSR1 as --signal does before the time limit
# (scancel --batch --signal=USR1), and then asserts that the job requeued
# itself, that the learner resumed from the checkpoint, that the run
# SUCCEEDED and that both components of the job ended COMPLETED. Every wait
# polls against a deadline; the daemons, and any process of the job, are
# killed on exit whatever happens.
#
# Needs root (slurmd launches the job's tasks) and the Debian packages of
# tools/setup.sh (slurmctld, slurmd, slurm-client, munge). Environment:
#   RL_BIN_DIR, RL_RLCTL     binaries and rlctl (default: bazel-bin, .venv)
#   RL_SLURM_TEST_TIMEOUT    overall deadline in seconds (default 540)
#   RL_SLURM_TEST_KEEP=1     keep the temporary directory (its path is printed)
set -euo pipefail

T0=$SECONDS
DEADLINE=$((T0 + ${RL_SLURM_TEST_TIMEOUT:-540}))
say() { printf '[slurm_test %3ds] %s\n' "$((SECONDS - T0))" "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}

# --- what to run ----------------------------------------------------------------
if [[ -n "${TEST_SRCDIR:-}" ]]; then # bazel test: everything from runfiles
  HERE="$TEST_SRCDIR/${TEST_WORKSPACE:-rl_service}"
  BIN="$HERE"
  RLCTL="$HERE/python/rlctl"
else
  HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  BIN="${RL_BIN_DIR:-$HERE/bazel-bin}"
  RLCTL="${RL_RLCTL:-$HERE/.venv/bin/rlctl}"
fi
SBATCH_SCRIPT="$HERE/deploy/slurm/rl_job.sbatch"
RUN_FILE="$HERE/deploy/slurm/cartpole_slurm.yaml"

[[ "$(id -u)" == 0 ]] || fail "needs root (slurmd starts the job's tasks)"
for tool in munged mungekey slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
  command -v "$tool" >/dev/null || PATH="$PATH:/usr/sbin:/sbin"
  command -v "$tool" >/dev/null || fail "$tool not found: run tools/setup.sh"
done
for b in coordinator/coordinator_main learner/learner_main actor/actor_main \
  telemetry/telemetry_main; do
  [[ -x "$BIN/$b" ]] || fail "$BIN/$b missing: bazel build //${b%/*}:${b#*/}"
done
[[ -x "$RLCTL" ]] || fail "$RLCTL missing: run tools/setup.sh"

# --- the temporary cluster's directory and its cleanup ---------------------------
# Under /tmp, not $TEST_TMPDIR: the munge socket path must stay short.
TMP="$(mktemp -d /tmp/rl-slurm.XXXXXX)"
chmod 755 "$TMP" # munged checks the permissions of its socket's directories
mkdir -p "$TMP/munge" "$TMP/sock" "$TMP/state" "$TMP/spool" "$TMP/log" "$TMP/submit"
chmod 700 "$TMP/munge"
export SLURM_CONF="$TMP/slurm.conf"
MARK="RL_SLURM_TEST_MARK=$TMP" # in the environment of the job's processes only
DAEMON_PIDS=()                 # started in this order, stopped in reverse
JOB_ID=""

# Processes of the job (the batch script, steps, workers) carry $MARK.
job_pids() {
  local env
  for env in /proc/[0-9]*/environ; do
    if grep -qzxF -- "$MARK" "$env" 2>/dev/null; then
      env="${env#/proc/}"
      echo "${env%/environ}"
    fi
  done
}

cleanup() {
  local rc=$? i pid left=()
  set +e
  trap - EXIT INT TERM
  if [[ -n "$JOB_ID" ]]; then
    scancel "$JOB_ID" 2>/dev/null
    for i in $(seq 1 20); do
      [[ -z "$(job_pids)" ]] && break
      sleep 0.5
    done
  fi
  mapfile -t left < <(job_pids)
  if ((${#left[@]})); then
    say "killing leftover job processes: ${left[*]}"
    kill -KILL "${left[@]}" 2>/dev/null
  fi
  for ((i = ${#DAEMON_PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${DAEMON_PIDS[i]}" 2>/dev/null
  done
  for pid in "${DAEMON_PIDS[@]}"; do
    for i in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if ((rc != 0)); then
    for f in "$TMP"/log/slurmctld.log "$TMP"/log/slurmd-*.log \
      "$TMP"/submit/rl-*.out "$TMP"/submit/runs/*/logs/*.log; do
      [[ -f "$f" ]] || continue
      echo "----- tail of $f"
      tail -n 25 "$f"
    done
  fi
  if [[ "${RL_SLURM_TEST_KEEP:-0}" == 1 ]]; then
    say "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  say "daemons stopped; $( ((rc == 0)) && echo PASS || echo "FAIL (status $rc)") after $((SECONDS - T0)) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Polls COMMAND every second until it succeeds; fails with WHAT after SECS
# seconds (or at the overall deadline).
wait_for() {
  local secs=$1 what=$2
  shift 2
  local until=$((SECONDS + secs))
  ((until > DEADLINE)) && until=$DEADLINE
  until "$@"; do
    ((SECONDS < until)) || fail "timed out waiting for $what"
    sleep 1
  done
}

# Free TCP ports: six, then the first of two consecutive ones (the two
# learners' rendezvous stores on node n1).
free_ports() {
  python3 - <<'EOF'
import socket
held = []
def bind(port=0):
    s = socket.socket()
    s.bind(("", port))
    held.append(s)
    return s.getsockname()[1]
ports = [bind() for _ in range(6)]
while True:
    p = bind()
    try:
        bind(p + 1)
        break
    except OSError:
        pass
print(" ".join(map(str, ports + [p])))
EOF
}
read -r CTLD_PORT N1_PORT N2_PORT COORD_PORT TEL_PORT TEL_HTTP_PORT RDZV_PORT \
  <<<"$(free_ports)"

# --- MUNGE ---------------------------------------------------------------------------
mungekey --create --keyfile="$TMP/munge/munge.key" --bits=1024
MUNGE_SOCKET="$TMP/sock/munge.socket"
munged --foreground --force --num-threads=4 --socket="$MUNGE_SOCKET" \
  --key-file="$TMP/munge/munge.key" --pid-file="$TMP/munge/munged.pid" \
  --seed-file="$TMP/munge/munged.seed" --log-file="$TMP/log/munged.log" \
  >"$TMP/log/munged.out" 2>&1 &
DAEMON_PIDS+=($!)
wait_for 20 "munged" test -S "$MUNGE_SOCKET"

# --- Slurm: one controller, two nodes --------------------------------------------------
# Both nodes are this machine (127.0.0.1) with their own ports, spool
# directories and logs (%n: the node name). cred_expire=10: a requeued job
# may start again after cred_expire + 1 s (default 120 s). No accounting
# database: job states come from scontrol (MinJobAge keeps finished jobs
# there) and the job-completion log.
cat >"$SLURM_CONF" <<EOF
ClusterName=rltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=10
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool/%n
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd-%n.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$TMP/log/jobcomp.txt
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=10
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$N1_PORT CPUs=2 RealMemory=1000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$N2_PORT CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >"$TMP/log/slurmctld.out" 2>&1 &
DAEMON_PIDS+=($!)
ctld_up() { [[ "$(scontrol ping 2>/dev/null)" == *"is UP"* ]]; }
wait_for 30 "slurmctld" ctld_up
for node in n1 n2; do
  slurmd -D -N "$node" -f "$SLURM_CONF" >"$TMP/log/slurmd-$node.out" 2>&1 &
  DAEMON_PIDS+=($!)
done
nodes_idle() { [[ "$(sinfo -h -N -o '%N=%t' | sort | tr '\n' ' ')" == "n1=idle n2=idle " ]]; }
wait_for 60 "nodes n1 and n2 idle" nodes_idle
say "slurm $(sinfo -V | cut -d' ' -f2): controller on port $CTLD_PORT, nodes n1 (port $N1_PORT) and n2 (port $N2_PORT) idle"

# --- submit ---------------------------------------------------------------------------
# Learners of binaries older than --advertise_address/--rendezvous_port run
# without them (the probe ends at the unknown last flag, exit 2, either way).
probe="$("$BIN/learner/learner_main" --advertise_address=127.0.0.1 \
  --rendezvous_port=0 --rl_slurm_test_probe 2>&1 || true)"
if [[ "$probe" == *"unknown flag --rl_slurm_test_probe"* ]]; then
  RDZV_FLAGS=1
else
  RDZV_FLAGS=0
  say "note: learner_main has no --advertise_address/--rendezvous_port; RL_RENDEZVOUS_FLAGS=0"
fi
JOB_ID="$(cd "$TMP/submit" && env "$MARK" RL_BIN_DIR="$BIN" RL_RLCTL="$RLCTL" \
  RL_HEAD_ADDRESS=127.0.0.1 RL_ADVERTISE_ADDRESS=127.0.0.1 \
  RL_COORDINATOR_PORT="$COORD_PORT" RL_TELEMETRY_PORT="$TEL_PORT" \
  RL_TELEMETRY_HTTP_PORT="$TEL_HTTP_PORT" RL_RENDEZVOUS_PORT="$RDZV_PORT" \
  RL_RENDEZVOUS_FLAGS="$RDZV_FLAGS" RL_STOP_TIMEOUT=30 \
  sbatch --parsable --ntasks=2 : --ntasks=2 "$SBATCH_SCRIPT" "$RUN_FILE")"
JOB_ID="${JOB_ID%%[+;]*}"
[[ "$JOB_ID" =~ ^[0-9]+$ ]] || fail "sbatch printed '$JOB_ID'"
JOB_DIR="$TMP/submit/runs/slurm-$JOB_ID"
JOB_OUT="$TMP/submit/rl-$JOB_ID.out"
COORD="127.0.0.1:$COORD_PORT"
say "submitted heterogeneous job $JOB_ID: $(squeue -h -j "$JOB_ID" -o '%i:%T' | tr '\n' ' ')"

# JobState (or another FIELD) of each component of the job, space-separated.
job_field() { scontrol -o show job "$JOB_ID" | grep -o " $1=[^ ]*" | cut -d= -f2 | tr '\n' ' '; }
job_running() { [[ "$(job_field JobState)" == "RUNNING RUNNING " ]]; }
wait_for 60 "job $JOB_ID to start" job_running
say "job $JOB_ID running: component 0 (learners) on node $(job_field NodeList | cut -d' ' -f1), component 1 (actors) on node $(job_field NodeList | cut -d' ' -f2)"

run_running() { [[ -n "$("$RLCTL" --coordinator "$COORD" --timeout 2 list --state RUNNING 2>/dev/null)" ]]; }
wait_for 120 "the run to be RUNNING" run_running
workers="$("$RLCTL" --coordinator "$COORD" workers)"
say "workers: $(tr -s ' ' <<<"$workers" | tr '\n' ';')"
for w in learner-000 learner-001 actor-000 actor-001; do
  grep -q "^$w .*run-" <<<"$workers" || fail "$w does not hold the run"
done

# --- the time-limit signal, mid-run -----------------------------------------------------
has_checkpoint() { compgen -G "$JOB_DIR/runs/*/checkpoints/ckpt-*/COMPLETE" >/dev/null; }
wait_for 180 "a checkpoint" has_checkpoint
say "checkpoint: $(cd "$JOB_DIR/runs" && ls -d -- */checkpoints/ckpt-* | tail -n 1);" \
  "run: $("$RLCTL" --coordinator "$COORD" list | tr -s ' ')"
scancel --batch --signal=USR1 "$JOB_ID"
say "sent SIGUSR1 to the batch shell (as --signal=B:USR1@120 would)"
requeued() { [[ "$(job_field Restarts)" == "1 1 " ]]; }
wait_for 90 "the job to requeue itself" requeued
say "job $JOB_ID requeued: $(job_field JobState)"

# Only Slurm's backfill scheduler starts heterogeneous jobs, and it runs only
# after some state changed: when the requeued job's BeginTime passes (11 s,
# cred_expire + 1) nothing else changes on this idle cluster, so the test
# touches the job's comment until it runs again (a busy cluster needs no
# such help).
restarted() {
  [[ "$(job_field JobState)" != *PENDING* ]] && return 0
  scontrol update JobId="$JOB_ID" Comment="requeued" 2>/dev/null
  return 1
}
wait_for 60 "the requeued job to start again" restarted
say "job $JOB_ID started again: $(job_field JobState)"

# --- to the end ------------------------------------------------------------------------
job_done() {
  case "$(job_field JobState)" in
  *PENDING* | *RUNNING* | *REQUEUE* | *CONFIGURING* | *COMPLETING*) return 1 ;;
  esac
}
wait_for $((DEADLINE - SECONDS)) "job $JOB_ID to end" job_done

# --- assertions -----------------------------------------------------------------------
STATE="$(job_field JobState)"
say "job $JOB_ID: JobState=$STATE ExitCode=$(job_field ExitCode) Restarts=$(job_field Restarts)"
sed -E 's/^(JobId=[0-9]+).*(JobState=[A-Z_]+).*(NodeList=[^ ]+).*/  jobcomp: \1 \2 \3/' \
  "$TMP/log/jobcomp.txt"
[[ "$STATE" == "COMPLETED COMPLETED " ]] || fail "job state '$STATE', expected COMPLETED for both components"
[[ "$(job_field ExitCode)" == "0:0 0:0 " ]] || fail "job exit code $(job_field ExitCode)"
[[ "$(grep -c 'JobState=COMPLETED' "$TMP/log/jobcomp.txt")" == 2 ]] ||
  fail "the job-completion log lacks 2 COMPLETED records"
grep -q 'SIGUSR1: time limit near' "$JOB_OUT" || fail "the batch script did not handle SIGUSR1"
# The batch script says so before it calls scontrol requeue (slurmd kills it
# right after); that the requeue happened was waited for above (Restarts).
grep -q "requeueing job $JOB_ID" "$JOB_OUT" || fail "the batch script did not requeue the job"
grep -q 'already submitted run-' "$JOB_OUT" || fail "the requeued job did not get its run back"
resumed="$(grep -h 'resumed from' "$JOB_DIR"/logs/learner-*.log | tail -n 1)"
[[ -n "$resumed" ]] || fail "the learner did not resume from a checkpoint after the requeue"
say "learner: ${resumed##*] }"
succeeded="$(grep -E '^run-[0-9]+ SUCCEEDED after [0-9]+ steps' "$JOB_OUT" | tail -n 1)"
[[ -n "$succeeded" ]] || fail "no 'run-N SUCCEEDED' line in $JOB_OUT"
say "rlctl: $succeeded"
grep -F '[rl_job' "$JOB_OUT" | sed 's/^/  /'
