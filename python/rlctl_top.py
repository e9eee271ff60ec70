"""rlctl top: a live view of the active runs, their state from the
coordinator and their speed, return and policy lag from the telemetry
service."""

import math
import sys
import time

import grpc

from rlservice.client import ClientError, state_name

from rlctl_format import format_table, text
from rlctl_runs import fmt_return


ACTIVE_STATES = ("RUNNING", "PLACING", "QUEUED")
TOP_METRICS = ("learner/steps_per_second", "learner/mean_return", "learner/policy_lag")
TOP_MAX_WAITING = 10  # PLACING/QUEUED runs shown (newest first)


def run_figure(values, name):
    """The run's value of metric `name` in `values` (TelemetryClient.latest):
    the bare series, else rank 0's (a gang of learners labels each rank's
    figures {rank=N}); None if neither."""
    value = values.get(name)
    return values.get(name + "{rank=0}") if value is None else value


def top_frame(client, tclient):
    """One frame of `rlctl top` as text. ClientError if the coordinator fails."""
    runs = client.list(states=ACTIVE_STATES)
    workers = client.workers()
    assigned = {}
    for w in workers:
        if w.assignment.run_id:
            assigned[w.assignment.run_id] = assigned.get(w.assignment.run_id, 0) + 1
    order = {s: i for i, s in enumerate(ACTIVE_STATES)}
    runs = sorted(runs, key=lambda r: order.get(state_name(r.state), 9))  # stable
    running = [r for r in runs if state_name(r.state) == "RUNNING"]
    waiting = [r for r in runs if state_name(r.state) != "RUNNING"]
    hidden = max(0, len(waiting) - TOP_MAX_WAITING)
    shown = running + waiting[:TOP_MAX_WAITING]

    warning = None
    rows = []
    for run in shown:
        values = {}
        if warning is None and state_name(run.state) == "RUNNING":
            try:
                values = tclient.latest(run.run_id, TOP_METRICS)
            except ClientError as e:
                if e.code != grpc.StatusCode.NOT_FOUND:  # NOT_FOUND: no metrics yet
                    warning = text(" ".join(str(e).split()))
        total = run.spec.total_env_steps
        steps = run.progress.env_steps
        sps = run_figure(values, "learner/steps_per_second")
        lag = run_figure(values, "learner/policy_lag")
        rows.append([
            run.run_id, state_name(run.state), str(steps),
            f"{min(100.0, 100.0 * steps / total):.1f}%" if total > 0 else "-",
            "-" if sps is None else f"{sps:.0f}",
            fmt_return(run_figure(values, "learner/mean_return")),
            "-" if lag is None or math.isnan(lag) else f"{lag:.1f}",
            str(assigned.get(run.run_id, 0)),
            run.spec.name or "-",
        ])
    alive = sum(1 for w in workers if w.alive)
    lines = [f"rlctl top  {time.strftime('%H:%M:%S')}  coordinator {text(client.address)}  "
             f"telemetry {text(tclient.address)}  |  {len(running)} running, "
             f"{len(waiting)} waiting, workers {alive} alive / {len(workers)}"]
    if rows:
        lines += format_table(["RUN", "STATE", "ENV STEPS", "PROGRESS", "SPS", "RETURN",
                               "LAG", "WORKERS", "NAME"], rows, right=(2, 3, 4, 5, 6, 7))
    else:
        lines.append("no active runs")
    if hidden:
        lines.append(f"... and {hidden} more waiting")
    if warning:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def top(client, tclient, interval, once):
    if not interval > 0:
        raise ValueError("--interval: must be > 0")
    live = sys.stdout.isatty() and not once
    try:
        while True:
            try:
                frame = top_frame(client, tclient)
            except ClientError as e:
                if once:
                    raise
                frame = f"rlctl top  {time.strftime('%H:%M:%S')}  error: {text(e)}"
            if live:
                sys.stdout.write("\033[H\033[2J" + frame + "\n")
                sys.stdout.flush()
            else:
                print(frame, flush=True)
            if once:
                return 0
            if not live:
                print(flush=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
