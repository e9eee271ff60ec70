"""rlctl: the command-line client of the training service.

  rlctl submit RUN_FILE [--watch] [--key KEY] [--retry-for S]
  rlctl list [--state STATE]
  rlctl get RUN_ID
  rlctl cancel RUN_ID
  rlctl watch RUN_ID [--retry-for S]
  rlctl workers
  rlctl metrics RUN_ID [--name NAME ...] [--prefix P] [--since 10m] [--buckets N] [--csv]
  rlctl top [--interval S] [--once]
  rlctl export RUN_ID -o FILE [--checkpoint N] [--sampled]
  rlctl sweep submit SWEEP_FILE [--watch] [--key KEY] [--interval S] [--retry-for S]
  rlctl sweep submit SWEEP_FILE --optuna [--sampler tpe|random] [--seed N]
  rlctl sweep list
  rlctl sweep get SWEEP_ID
  rlctl sweep cancel SWEEP_ID
  rlctl sweep watch SWEEP_ID [--interval S] [--retry-for S]

The coordinator's address comes from --coordinator or $RL_COORDINATOR
(default 127.0.0.1:50051), the telemetry service's from --telemetry or
$RL_TELEMETRY (default 127.0.0.1:50052). Exit codes: 0 success (a watched run
or sweep SUCCEEDED), 1 a watched run or sweep FAILED or was CANCELLED, 2 bad
input (run or sweep file, arguments), 3 not found (also: a run with no
metrics), 4 coordinator or telemetry service unreachable, 5 other errors.
`watch`, `submit --watch` and `sweep watch` reconnect to a coordinator that
went away (a restart) with backoff, and exit 4 only after --retry-for seconds
(default 60) without it. Sweeps (docs/sweeps.md) run on the coordinator; a
sweep file's base_run_file is read here, beside the sweep file, and sent
with it.
"""

import argparse
import csv
import itertools
import math
import os
import re
import subprocess
import sys
import time

import grpc

from rlservice.client import (DEFAULT_RETRY_FOR_S, Client, ClientError, TERMINAL_STATES,
                              mean_return, state_name)
from rlservice.policy import check_output_path, export_policy, locate_rl_local
from rlservice.security import Security
from rlservice.telemetry import TelemetryClient, default_address as default_telemetry

from rlctl_format import format_table, print_table, text, text_lines
from rlctl_sweeps import sweep_command


def fmt_duration(seconds):
    if seconds is None or seconds < 0 or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = int(seconds + 0.5)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def progress_line(run):
    """`watch`'s line: state, steps, steps/s, mean return of the last 100
    episodes, policy version and, while the run is not finished, its ETA."""
    p = run.progress
    total = run.spec.total_env_steps or 1
    frac = min(1.0, p.env_steps / total)
    bar = "#" * int(frac * 20) + "-" * (20 - int(frac * 20))
    line = (f"{text(run.run_id)} {state_name(run.state):9s} [{bar}] {p.env_steps}/{total} steps"
            f" | {p.steps_per_second:.0f} steps/s | return(100) {fmt_return(mean_return(run))}"
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


def assignment_text(worker):
    """'run-000001 rank 1/2' (learners: of the gang), 'run-000001 actor 0', or 'idle'."""
    a = worker.assignment
    if not a.run_id:
        return "idle"
    if worker.capabilities.role == 1:
        return f"{text(a.run_id)} rank {a.rank}/{max(a.world_size, 1)}"
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
        what = (f"learner rank {w.assignment.rank}/{max(w.assignment.world_size, 1)}"
                if w.capabilities.role == 1 else f"actor {w.assignment.rank}")
        print(f"  {what:18s} {text(w.worker_id):24s} {text(w.address or '-'):22s} "
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
          + (f", mean return {fmt_return(ret)}" if ret is not None else "")
          + (f": {text_lines(run.failure_reason)}" if run.failure_reason else ""))
    return 0 if state == "SUCCEEDED" else 1


# --- metrics ------------------------------------------------------------------

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text):
    """"30s", "10m", "2h", "1d", "1h30m" or plain seconds ("90") -> seconds."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"bad duration {text!r} (expected e.g. 30s, 10m, 2h, 1d, 1h30m)")
    return sum(float(n) * DURATION_UNITS[u] for n, u in parts)


def fmt_labels(labels, sep=","):
    return sep.join(f"{k}={labels[k]}" for k in sorted(labels))


def fmt_value(v):
    if v is None:
        return "-"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return f"{v:.6g}"


def fmt_steps(lo, hi):
    return str(lo) if lo == hi else f"{lo}-{hi}"


def fmt_wall_ns(ns):
    """Exact seconds since the epoch ("1700000000.123456789")."""
    if ns < 0:
        return repr(ns / 1e9)
    return f"{ns // 10**9}.{ns % 10**9:09d}"


def not_found(message):
    return ClientError(message, grpc.StatusCode.NOT_FOUND)


def metrics_series_table(tclient, args, since):
    """The run's series: name, labels, points, last step, last value."""
    infos = tclient.list_series(args.run_id)
    if not infos:
        raise not_found(f"run {args.run_id} has no metrics (at {tclient.address})")
    last = {}
    for s in tclient.query(args.run_id, since=since, min_step=args.min_step,
                           max_step=args.max_step, buckets=1):
        if s["buckets"]:
            b = s["buckets"][-1]
            last[(s["name"], fmt_labels(s["labels"]))] = (b["max_step"], b["last"])
    rows = []
    for info in sorted(infos, key=lambda i: (i["name"], fmt_labels(i["labels"]))):
        key = (info["name"], fmt_labels(info["labels"]))
        if key not in last and (since is not None or args.min_step or args.max_step):
            continue  # no points in the asked range
        step, value = last.get(key, (None, None))
        rows.append([info["name"], key[1] or "-", str(info["num_points"]),
                     "-" if step is None else str(step), fmt_value(value)])
    if not rows:
        print(f"run {text(args.run_id)}: no points in the given range")
        return 0
    print_table(["NAME", "LABELS", "POINTS", "LAST STEP", "LAST VALUE"], rows,
                right=(2, 3, 4))
    return 0


def check_names(args, series):
    """NOT_FOUND when nothing matched; a warning for each missing --name."""
    if not series:
        what = (", ".join(args.name) if args.name else f"prefix {args.prefix!r}")
        raise not_found(f"run {args.run_id} has no series matching {what}")
    found = {s["name"] if isinstance(s, dict) else s.name for s in series}
    for name in args.name or ():
        if name not in found:
            print(f"rlctl: warning: run {text(args.run_id)} has no series {text(name)}",
                  file=sys.stderr)


def metrics_values(tclient, args, since):
    """Each selected series as a table of step buckets (or raw points)."""
    buckets = 20 if args.buckets is None else args.buckets
    series = tclient.query(args.run_id, names=args.name or None, prefix=args.prefix,
                           min_step=args.min_step, max_step=args.max_step, since=since,
                           buckets=buckets)
    check_names(args, series)
    for i, s in enumerate(series):
        if i:
            print()
        labels = fmt_labels(s["labels"])
        print(text(s["name"]) + (f" {{{text(labels)}}}" if labels else ""))
        if buckets > 0:
            rows = [[fmt_steps(b["min_step"], b["max_step"]), str(b["count"]),
                     fmt_value(b["mean"]), fmt_value(b["min"]), fmt_value(b["max"]),
                     fmt_value(b["last"])] for b in s["buckets"]]
            headers = ["STEPS", "COUNT", "MEAN", "MIN", "MAX", "LAST"]
            right = (1, 2, 3, 4, 5)
        else:
            rows = [[str(p.step), time.strftime("%Y-%m-%d %H:%M:%S",
                                                time.localtime(p.wall_time)),
                     fmt_value(p.value)] for p in s["points"]]
            headers = ["STEP", "WALL TIME", "VALUE"]
            right = (0, 2)
        if rows:
            print_table(headers, rows, right=right)
        else:
            print("  (no points in the given range)")
    return 0


def metrics_csv(tclient, args, since):
    """Raw points (or, with --buckets N, buckets) as CSV for pandas."""
    buckets = args.buckets or 0
    out = csv.writer(sys.stdout, lineterminator="\n")
    if buckets > 0:
        response = tclient.query_response(
            args.run_id, names=args.name or None, prefix=args.prefix,
            min_step=args.min_step, max_step=args.max_step, since=since, buckets=buckets)
        if args.name or args.prefix:
            check_names(args, response.series)
        out.writerow(["run", "name", "labels", "min_step", "max_step", "count", "mean",
                      "min", "max", "last"])
        for s in response.series:
            labels = fmt_labels(s.labels, ";")
            for b in s.buckets:
                out.writerow([args.run_id, s.name, labels, b.min_step, b.max_step, b.count,
                              repr(b.mean), repr(b.min), repr(b.max), repr(b.last)])
        return 0
    # Raw points, in step windows when there are too many for one query.
    pieces = tclient.raw_series(args.run_id, names=args.name or None, prefix=args.prefix,
                                min_step=args.min_step, max_step=args.max_step, since=since)
    first = next(pieces, None)
    if first is None:
        check_names(args, [])  # raises NOT_FOUND
    out.writerow(["run", "name", "labels", "step", "wall_time", "value"])
    seen = set()
    for s in itertools.chain([first], pieces):
        seen.add(s.name)
        labels = fmt_labels(s.labels, ";")
        for p in s.points:
            out.writerow([args.run_id, s.name, labels, p.step, fmt_wall_ns(p.wall_time_ns),
                          repr(p.value)])
    check_names(args, [{"name": name} for name in seen])  # warnings
    return 0


def metrics(tclient, args):
    since = None
    if args.since:
        try:
            since = parse_duration(args.since)
        except ValueError as e:
            raise ValueError(f"--since: {e}") from None
    if args.buckets is not None and args.buckets < 0:
        raise ValueError("--buckets: must be >= 0")
    if args.csv:
        return metrics_csv(tclient, args, since)
    if not args.name and not args.prefix:
        return metrics_series_table(tclient, args, since)
    return metrics_values(tclient, args, since)


# --- top ----------------------------------------------------------------------

ACTIVE_STATES = ("RUNNING", "PLACING", "QUEUED")
TOP_METRICS = ("learner/steps_per_second", "learner/mean_return", "learner/policy_lag")
TOP_MAX_WAITING = 10  # PLACING/QUEUED runs shown (newest first)


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
        lag = values.get("learner/policy_lag")
        rows.append([
            run.run_id, state_name(run.state), str(steps),
            f"{min(100.0, 100.0 * steps / total):.1f}%" if total > 0 else "-",
            "-" if values.get("learner/steps_per_second") is None
            else f"{values['learner/steps_per_second']:.0f}",
            fmt_return(values.get("learner/mean_return")),
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


def fmt_return(value):
    """A mean return: one decimal from 10 up (475.2), three significant
    digits below (0.0123, 9.87), so that small returns are seen to move."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:#.3g}"


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


def seconds(text):
    """argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def add_retry_for(parser):
    parser.add_argument(
        "--retry-for", dest="retry_for", type=seconds, default=DEFAULT_RETRY_FOR_S,
        metavar="SECONDS", help="while watching, reconnect to an unreachable coordinator "
        f"for up to this long (default {DEFAULT_RETRY_FOR_S:g}; 0: exit at once)")


def check_env(run_file, steps):
    """`rl_local check-env`: its output and exit code (0 clean, 1 a violation,
    2 bad input)."""
    try:
        rl_local, _ = locate_rl_local()
    except ClientError as e:
        print(f"rlctl: error: check-env runs rl_local: {text(e)}", file=sys.stderr)
        return 2
    done = subprocess.run([rl_local, "check-env", f"--run={run_file}", f"--steps={steps}"],
                          capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def export(client, args):
    """`rlctl export`: the run's spec and checkpoint handed to `rl_local export`
    (which must see the checkpoint: run it where the learner wrote it, e.g. the
    embedded coordinator's machine, or on the shared filesystem). A bad -o
    or a missing rl_local is bad input (ClientError, code None: exit 2), a
    run or checkpoint directory that is not there NOT_FOUND (3); main maps
    them. Says which rl_local it ran."""
    check_output_path(args.output)
    rl_local, where = locate_rl_local()
    print(f"rl_local: {text(rl_local)} ({where})", flush=True)
    done = export_policy(client, args.run_id, args.output, checkpoint=args.checkpoint,
                         fmt=args.format, sampled=args.sampled, rl_local=rl_local)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rlctl", description=__doc__.split("\n")[0])
    parser.add_argument("--coordinator", help="host:port (default $RL_COORDINATOR or 127.0.0.1:50051)")
    parser.add_argument("--telemetry",
                        help="telemetry host:port (default $RL_TELEMETRY or 127.0.0.1:50052)")
    parser.add_argument("--timeout", type=float, default=10.0, help="deadline of each call, seconds")
    parser.add_argument("--token-file", dest="token_file",
                        help="bearer token (default $RL_TOKEN_FILE, else runs/auth/user.token if present)")
    parser.add_argument("--tls-ca", dest="tls_ca", help="CA certificate: speak TLS (default $RL_TLS_CA)")
    parser.add_argument("--tls-cert", dest="tls_cert", help="client certificate, for mutual TLS")
    parser.add_argument("--tls-key", dest="tls_key", help="key of --tls-cert")
    parser.add_argument("--tls-server-name", dest="tls_server_name",
                        help="name to check in the server's certificate")
    parser.add_argument("--insecure", action="store_true",
                        help="plaintext without a token (servers started with --insecure)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("submit", help="submit a run file")
    p.add_argument("run_file")
    p.add_argument("--watch", action="store_true", help="follow the run until it ends")
    p.add_argument("--key", default="", help="idempotency key")
    add_retry_for(p)
    p = sub.add_parser("list", help="list runs")
    p.add_argument("--state", action="append", default=[], help="only runs in this state")
    for name in ("get", "cancel"):
        sub.add_parser(name).add_argument("run_id")
    p = sub.add_parser("watch", help="follow a run until it ends")
    p.add_argument("run_id")
    add_retry_for(p)
    sub.add_parser("workers", help="registered workers")
    p = sub.add_parser(
        "metrics", help="a run's metrics from the telemetry service",
        description="Without --name/--prefix: the run's series. With them: each "
        "series downsampled to --buckets step buckets (default 20; 0: raw points). "
        "--csv: raw points as run,name,labels,step,wall_time,value.")
    p.add_argument("run_id")
    p.add_argument("--name", action="append", default=[], help="metric name (repeatable)")
    p.add_argument("--prefix", default="", help="metrics whose name starts with this")
    p.add_argument("--since", help="only points of the last DURATION (30s, 10m, 2h, 1d)")
    p.add_argument("--buckets", type=int, help="step buckets per series (0: raw points)")
    p.add_argument("--min-step", dest="min_step", type=int, default=0)
    p.add_argument("--max-step", dest="max_step", type=int, default=0, help="0: no bound")
    p.add_argument("--csv", action="store_true", help="CSV (raw points) on stdout")
    p = sub.add_parser(
        "check-env", help="step a run file's environment here, against the plugin contract",
        description="Runs `rl_local check-env` on this machine (as an actor would load the "
        "environment): its spaces, step rate and the first violation found. rl_local is "
        "$RL_LOCAL, else this checkout's optimised build (bazel-out/k8-opt/bin/trainer/rl_local), "
        "else rl_local on PATH, else this checkout's bazel-bin/trainer/rl_local.")
    p.add_argument("run_file")
    p.add_argument("--steps", type=int, default=10000, help="batch steps of random actions")
    p = sub.add_parser(
        "export", help="a run's trained policy as a file to deploy (TorchScript or ONNX)",
        description="Writes the run's newest (or --checkpoint N's) policy as a self-contained "
        "TorchScript or ONNX file, observation normalisation included, and FILE.json naming its "
        "inputs and outputs. Runs `rl_local export` here, which reads the checkpoint "
        "directory `rlctl get` shows, and names the rl_local it ran: $RL_LOCAL, else this "
        "checkout's optimised build (bazel-out/k8-opt/bin/trainer/rl_local), else rl_local on "
        "PATH, else this checkout's bazel-bin/trainer/rl_local.")
    p.add_argument("run_id")
    p.add_argument("-o", "--output", required=True, help="the file to write")
    p.add_argument("--checkpoint", type=int, help="checkpoint number (default: the newest)")
    p.add_argument("--format", default="torchscript", choices=["torchscript", "onnx"],
                   help="torchscript (LibTorch, PyTorch) or onnx (onnxruntime and others)")
    p.add_argument("--sampled", action="store_true",
                   help="actions drawn from the policy (default: its most likely action)")
    p = sub.add_parser("top", help="live view of the active runs")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between frames")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p = sub.add_parser(
        "sweep", help="sweeps run by the coordinator: submit|list|get|cancel|watch",
        description="Many runs from one sweep file (docs/sweeps.md), scheduled by the "
        "coordinator. A sweep file's base_run_file is read here, relative to the sweep file, "
        "and sent with it.")
    sweep_sub = p.add_subparsers(dest="sweep_command", required=True,
                                 metavar="{submit,list,get,cancel,watch}")
    p = sweep_sub.add_parser("submit", help="submit a sweep file")
    p.add_argument("sweep_file")
    p.add_argument("--watch", action="store_true", help="follow the sweep until it ends")
    p.add_argument("--key", default="", help="idempotency key")
    p.add_argument("--interval", type=float, default=2.0,
                   help="with --watch or --optuna: seconds between polls")
    p.add_argument("--optuna", action="store_true",
                   help="a sweep of method external: Optuna's sampler chooses its trials "
                   "from here until it ends (ask/tell through the coordinator)")
    p.add_argument("--sampler", choices=["tpe", "random"], default="tpe",
                   help="with --optuna: TPE (default) or random")
    p.add_argument("--seed", type=int, default=None,
                   help="with --optuna: the sampler's seed (default: the sweep file's)")
    add_retry_for(p)
    sweep_sub.add_parser("list", help="list sweeps")
    sweep_sub.add_parser("get", help="a sweep and its trials, best first").add_argument(
        "sweep_id")
    sweep_sub.add_parser("cancel", help="cancel a sweep's unfinished trials").add_argument(
        "sweep_id")
    p = sweep_sub.add_parser("watch", help="follow a sweep until it ends")
    p.add_argument("sweep_id")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    add_retry_for(p)
    args = parser.parse_args(argv)
    if args.command == "check-env":
        return check_env(args.run_file, args.steps)

    security = Security.from_env(
        token_file=args.token_file, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
        tls_key=args.tls_key, tls_server_name=args.tls_server_name, insecure=args.insecure)
    client = tclient = None
    try:
        client = Client(args.coordinator, timeout=args.timeout, security=security)
        if args.command in ("metrics", "top"):
            tclient = TelemetryClient(
                args.telemetry if args.telemetry is not None else default_telemetry(),
                timeout=args.timeout if args.command == "metrics" else min(args.timeout, 3.0),
                security=security)
        if args.command == "submit":
            run, created = client.submit_once(args.run_file, args.key)
            print(f"{'submitted' if created else 'already submitted'} {text(run.run_id)}")
            return watch(client, run.run_id, args.retry_for) if args.watch else 0
        if args.command == "list":
            for run in client.list(states=args.state):
                print_run(run)
            return 0
        if args.command == "get":
            run = client.get(args.run_id, with_history=True)
            print_run(run)
            print_details(run)
            print_placement(run, client.workers())
            return 0
        if args.command == "cancel":
            print_run(client.cancel(args.run_id))
            return 0
        if args.command == "watch":
            return watch(client, args.run_id, args.retry_for)
        if args.command == "workers":
            print_workers(client.workers())
            return 0
        if args.command == "metrics":
            return metrics(tclient, args)
        if args.command == "export":
            return export(client, args)
        if args.command == "top":
            return top(client, tclient, args.interval, args.once)
        if args.command == "sweep":
            return sweep_command(client, args)
    except ClientError as e:
        print(f"rlctl: error: {text(e)}", file=sys.stderr)
        if e.code is None or e.code == grpc.StatusCode.INVALID_ARGUMENT:
            return 2
        if e.code == grpc.StatusCode.NOT_FOUND:
            return 3
        if e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return 4
        return 5
    except BrokenPipeError:  # e.g. `rlctl metrics RUN --csv | head`
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except ValueError as e:  # e.g. an unknown state name
        print(f"rlctl: error: {text(e)}", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
        if tclient is not None:
            tclient.close()


if __name__ == "__main__":
    sys.exit(main())
