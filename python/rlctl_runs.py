"""rlctl's views of runs and workers (submit, list, get, cancel, watch,
workers): a run's lines, its details and placement, the workers' table, and
`watch` following a run to its end."""

import math
import sys
import time

from rlservice.client import TERMINAL_STATES, mean_return, state_name

from rlctl_format import text, text_lines


def fmt_duration(seconds):
    if seconds is None or seconds < 0 or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = int(seconds + 0.5)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def returns_text(run):
    """The mean return of the last 100 episodes, or with several policies
    each one's by name ("red 0.520, blue 0.310")."""
    if run.progress.policies:
        return ", ".join(f"{text(p.name)} {fmt_return(p.mean_return if p.episodes else None)}"
                         for p in run.progress.policies)
    return fmt_return(mean_return(run))


def progress_line(run):
    """`watch`'s line: state, steps, steps/s, mean return of the last 100
    episodes (each policy's in a run of several), policy version and, while
    the run is not finished, its ETA."""
    p = run.progress
    total = run.spec.total_env_steps or 1
    frac = min(1.0, p.env_steps / total)
    bar = "#" * int(frac * 20) + "-" * (20 - int(frac * 20))
    line = (f"{text(run.run_id)} {state_name(run.state):9s} [{bar}] {p.env_steps}/{total} steps"
            f" | {p.steps_per_second:.0f} steps/s | return(100) {returns_text(run)}"
            f" | v{p.policy_version}")
    if state_name(run.state) in TERMINAL_STATES:
        return line
    eta = (total - p.env_steps) / p.steps_per_second if p.steps_per_second > 0 else None
    return line + f" | ETA {fmt_duration(eta)}"


def print_run(run):
    print(f"{text(run.run_id)}  {state_name(run.state):9s}  {text(run.spec.name or '-'):20s}  "
          f"{text(run.spec.env.id):24s}  steps {run.progress.env_steps}"
          + (f"  owner: {text(run.owner)}" if run.owner else "")
          + (f"  reason: {text_lines(run.failure_reason)}" if run.failure_reason else "")
          + (f"  waiting: {text_lines(run.waiting_reason)}" if run.waiting_reason else ""))


def role_name(worker):
    return "learner" if worker.capabilities.role == 1 else "actor"


def device_checks_text(worker):
    """A worker's device self-checks in a word: '-' (none run), 'N passed',
    or 'K FAILED' (the failures are listed under the worker's line)."""
    checks = list(worker.device_checks)
    if not checks:
        return "-"
    failed = sum(1 for c in checks if not c.passed)
    return f"{failed} FAILED" if failed else f"{len(checks)} passed"


def print_workers(workers):
    print(f"{'WORKER':24s} {'ROLE':8s} {'ADDRESS':22s} {'DEVICES':12s} "
          f"{'ALIVE':5s} {'CHECKS':9s} ASSIGNMENT")
    for w in workers:
        print(f"{text(w.worker_id):24s} {role_name(w):8s} {text(w.address or '-'):22s} "
              f"{text(','.join(w.capabilities.devices) or 'cpu'):12s} "
              f"{'yes' if w.alive else 'no':5s} {device_checks_text(w):9s} "
              f"{assignment_text(w)}")
        for c in w.device_checks:
            if not c.passed:
                print(f"  self-check FAILED: {text(c.check)}: {text_lines(c.detail, '    ')}")


def learner_text(assignment):
    """'rank 1/2' (of the gang); with a learner per policy
    (resources.learner_per_policy: ranks k*N .. k*N+N-1 are policy k's
    gang of N = num_learners, as runspec/run_spec.cc LearnerRoleOf says)
    the policy it trains, and its rank in that gang where N > 1:
    'rank 1, policy blue', 'rank 3, policy blue 1/2'."""
    a = assignment
    policies = a.spec.policies
    per_policy = max(a.spec.resources.num_learners, 1)
    if a.spec.resources.learner_per_policy and 0 <= a.rank < len(policies) * per_policy:
        name = text(policies[a.rank // per_policy].name)
        member = f" {a.rank % per_policy}/{per_policy}" if per_policy > 1 else ""
        return f"rank {a.rank}, policy {name}{member}"
    return f"rank {a.rank}/{max(a.world_size, 1)}"


def assignment_text(worker):
    """'run-000001 rank 1/2' (learners: of the gang; 'rank 1, policy blue'
    with a learner per policy), 'run-000001 actor 0', or 'idle'."""
    a = worker.assignment
    if not a.run_id:
        return "idle"
    if worker.capabilities.role == 1:
        return f"{text(a.run_id)} {learner_text(a)}"
    return f"{text(a.run_id)} actor {a.rank}"


def _time(timestamp):
    """A Timestamp as local time, "2026-11-25 21:40:47"; "-" when unset."""
    if not timestamp.seconds and not timestamp.nanos:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp.seconds))


def print_details(run):
    """`rlctl get`: times, where the checkpoints are, the state changes."""
    created, updated = run.create_time.seconds, run.update_time.seconds
    print(f"created {_time(run.create_time)}, updated {_time(run.update_time)}"
          + (f" ({updated - created} s later)" if created and updated >= created else ""))
    if run.checkpoint_dir:
        print(f"checkpoints: {text(run.checkpoint_dir)}")
    if run.history:
        print("history:")
        for t in run.history:
            was = state_name(t.from_state) if t.from_state else "(new)"
            print(f"  {_time(t.time)}  {was:9s} -> "
                  f"{state_name(t.to_state):9s}"
                  + (f"  {text_lines(t.reason, ' ' * 6)}" if t.reason else ""))


def print_placement(run, workers):
    """The workers a run is placed on (learners by rank, then actors)."""
    placed = [w for w in workers if w.assignment.run_id == run.run_id]
    if not placed:
        return
    placed.sort(key=lambda w: (w.capabilities.role != 1, w.assignment.rank))
    print("placement:")
    for w in placed:
        what = (f"learner {learner_text(w.assignment)}"
                if w.capabilities.role == 1 else f"actor {w.assignment.rank}")
        print(f"  {what:30s} {text(w.worker_id):24s} {text(w.address or '-'):22s} "
              f"{text(','.join(w.capabilities.devices) or 'cpu')}"
              + ("" if w.alive else "  (not re-registered)"))


def watch(client, run_id, retry_for):
    """Follows the run to its final state (through coordinator restarts, for
    up to `retry_for` s of unavailability in a row); 0 if it SUCCEEDED."""
    tty = sys.stdout.isatty()
    last = [0.0]

    def outage(message):  # when a coordinator outage starts, and when it ends
        if tty:
            print()
        print(f"rlctl: {text(message)}", file=sys.stderr, flush=True)

    def show(run):
        if tty:
            sys.stdout.write("\r\033[K" + progress_line(run))
            sys.stdout.flush()
        elif time.monotonic() - last[0] >= 2 or state_name(run.state) in TERMINAL_STATES:
            print(progress_line(run), flush=True)
            last[0] = time.monotonic()

    run = client.wait(run_id, on_update=show, retry_for=retry_for, on_unavailable=outage,
                      on_reconnect=outage)
    if tty:
        print()
    state = state_name(run.state)
    ret = mean_return(run)
    print(f"{text(run.run_id)} {state} after {run.progress.env_steps} steps"
          + (f", mean return {returns_text(run)}" if ret is not None else "")
          + (f": {text_lines(run.failure_reason)}" if run.failure_reason else ""))
    return 0 if state == "SUCCEEDED" else 1


def fmt_return(value):
    """A mean return: one decimal from 10 up (475.2), three significant
    digits below (0.0123, 9.87), so that small returns are seen to move."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:#.3g}"
