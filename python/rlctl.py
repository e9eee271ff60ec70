"""rlctl: the command-line client of the training service.

  rlctl submit RUN_FILE [--watch] [--key KEY] [--retry-for S]
  rlctl list [--state STATE]
  rlctl get RUN_ID
  rlctl cancel RUN_ID
  rlctl watch RUN_ID [--retry-for S]
  rlctl workers
  rlctl metrics RUN_ID [--name NAME ... | --prefix P] [--since 10m] [--buckets N] [--csv]
  rlctl top [--interval S] [--once]
  rlctl export RUN_ID -o FILE [--checkpoint N] [--sampled] [--policy_name NAME]
  rlctl sweep submit SWEEP_FILE [--watch] [--key KEY] [--interval S] [--retry-for S]
  rlctl sweep submit SWEEP_FILE --optuna [--sampler tpe|random] [--seed N]
  rlctl sweep list
  rlctl sweep get SWEEP_ID
  rlctl sweep cancel SWEEP_ID
  rlctl sweep watch SWEEP_ID [--interval S] [--retry-for S]
  rlctl league RUN_DIR [--every N]

The coordinator's address comes from --coordinator or $RL_COORDINATOR
(default 127.0.0.1:50051), the telemetry service's from --telemetry or
$RL_TELEMETRY (default 127.0.0.1:50052). Exit codes: 0 success (a watched run
or sweep SUCCEEDED), 1 a watched run or sweep FAILED or was CANCELLED, 2 bad
input (run or sweep file, arguments), 3 not found (also: a run with no
metrics), 4 coordinator or telemetry service unreachable, 5 other errors,
130 interrupted (Ctrl-C). --timeout and every --interval are seconds > 0,
at most a day.
`watch`, `submit --watch` and `sweep watch` reconnect to a coordinator that
went away (a restart) with backoff, and exit 4 only after --retry-for seconds
(default 60) without it. Sweeps (docs/sweeps.md) run on the coordinator; a
sweep file's base_run_file is read here, beside the sweep file, and sent
with it.
"""

import argparse
import math
import os
import subprocess
import sys

import grpc

# Names rlctl.py held before its views moved to modules of their own stay
# importable from here (tests and scripts call rlctl.progress_line, ...).
from rlservice.client import (DEFAULT_RETRY_FOR_S, Client, ClientError,  # noqa: F401
                              TERMINAL_STATES, mean_return, state_name)
from rlservice.policy import check_output_path, export_policy, locate_rl_local
from rlservice.security import Security
from rlservice.telemetry import TelemetryClient, default_address as default_telemetry

from rlctl_format import format_table, print_table, text, text_lines  # noqa: F401
from rlctl_metrics import (DURATION_UNITS, check_names, fmt_labels,  # noqa: F401
                           fmt_steps, fmt_value, fmt_wall_ns, metrics, metrics_csv,
                           metrics_series_table, metrics_values, not_found, parse_duration)
from rlctl_runs import (assignment_text, device_checks_text, fmt_duration,  # noqa: F401
                        fmt_return, print_details, print_placement, print_run,
                        print_workers, progress_line, role_name, watch)
from rlctl_sweeps import sweep_command
from rlctl_top import ACTIVE_STATES, TOP_MAX_WAITING, TOP_METRICS, top, top_frame  # noqa: F401


# The longest --timeout or --interval: a day. Longer is a typo, and gRPC
# turns a deadline of 1e10 s into an instant DEADLINE_EXCEEDED.
MAX_SECONDS = 86400.0


def seconds(text):
    """argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def positive_seconds(text):
    """argparse type: a number of seconds > 0, at most MAX_SECONDS (a
    day); 0, negative, inf and nan are bad input."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and math.isfinite(value) and value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(
            f"expected seconds > 0 and at most {MAX_SECONDS:g} (a day), got {text!r}")
    return value


def positive_int(text):
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def add_retry_for(parser):
    parser.add_argument(
        "--retry-for", dest="retry_for", type=seconds, default=DEFAULT_RETRY_FOR_S,
        metavar="SECONDS", help="while watching, reconnect to an unreachable coordinator "
        f"for up to this long (default {DEFAULT_RETRY_FOR_S:g}; 0: exit at once)")


def check_env(run_file, steps):
    """`rl_local check-env`: its output and exit code (0 clean, 1 a violation,
    2 bad input, 75 an environment call past env.call_timeout_s)."""
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
                         fmt=args.format, sampled=args.sampled, rl_local=rl_local,
                         policy_name=getattr(args, "policy_name", None))
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def league(run_dir, every):
    from rlservice import league as lg
    try:
        matches = lg.read_matches(lg.matches_path(run_dir))
    except ValueError as e:
        print(f"rlctl: error: {text(e)}", file=sys.stderr)
        return 2
    ratings = lg.rate(matches)
    members = sum(1 for r in ratings if r.version < 0)
    print(f"{len(matches)} matches, {len(ratings) - members} versions"
          + (f", {members} member{'s' if members > 1 else ''}" if members else ""))
    print(lg.format_ratings(ratings, every))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rlctl", description=__doc__.split("\n")[0])
    parser.add_argument("--coordinator", help="host:port (default $RL_COORDINATOR or 127.0.0.1:50051)")
    parser.add_argument("--telemetry",
                        help="telemetry host:port (default $RL_TELEMETRY or 127.0.0.1:50052)")
    parser.add_argument("--timeout", type=positive_seconds, default=10.0,
                        help="deadline of each call, seconds (> 0, at most a day)")
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
    chosen = p.add_mutually_exclusive_group()
    chosen.add_argument("--name", action="append", default=[], help="metric name (repeatable)")
    chosen.add_argument("--prefix", default="",
                        help="metrics whose name starts with this (not with --name)")
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
    p.add_argument("--policy_name",
                   help="a run of several policies (policies:): the one to export, with its "
                   "own network (default: the first)")
    p = sub.add_parser("top", help="live view of the active runs")
    p.add_argument("--interval", type=positive_seconds, default=2.0,
                   help="seconds between frames")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p = sub.add_parser(
        "sweep", help="sweeps run by the coordinator: submit|list|get|cancel|watch",
        description="Many runs from one sweep file (docs/sweeps.md), scheduled by the "
        "coordinator. A sweep file's base_run_file is read here, relative to the sweep file, "
        "and sent with it.")
    sweep_sub = p.add_subparsers(dest="sweep_command", required=True,
                                 metavar="{submit,list,get,cancel,watch}")
    p = sweep_submit = sweep_sub.add_parser("submit", help="submit a sweep file")
    p.add_argument("sweep_file")
    p.add_argument("--watch", action="store_true", help="follow the sweep until it ends")
    p.add_argument("--key", default="", help="idempotency key")
    p.add_argument("--interval", type=positive_seconds, default=2.0,
                   help="with --watch or --optuna: seconds between polls")
    p.add_argument("--optuna", action="store_true",
                   help="a sweep of method external: Optuna's sampler chooses its trials "
                   "from here until it ends (ask/tell through the coordinator)")
    p.add_argument("--sampler", choices=["tpe", "random"],
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
    p.add_argument("--interval", type=positive_seconds, default=2.0,
                   help="seconds between polls")
    add_retry_for(p)
    p = sub.add_parser(
        "league", help="ratings of a league run's versions from its matches",
        description="Reads RUN_DIR/league/matches.csv (a run with a league block writes it) "
        "and rates every version with OpenSkill's Bradley-Terry model, matches in the order "
        "they were played. Reads the directory here: the run's directory on this machine.")
    p.add_argument("run_dir", help="the run's directory (or its matches.csv)")
    p.add_argument("--every", type=positive_int, default=1,
                   help="show every N-th version (and the last)")
    args = parser.parse_args(argv)
    if args.command == "sweep" and args.sweep_command == "submit" and not args.optuna:
        for flag, value in (("--sampler", args.sampler), ("--seed", args.seed)):
            if value is not None:
                sweep_submit.error(f"{flag}: only with --optuna")
    if args.command == "check-env":
        return check_env(args.run_file, args.steps)
    if args.command == "league":
        return league(args.run_dir, args.every)

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
    except KeyboardInterrupt:  # Ctrl-C in watch, submit --watch, sweep watch
        print("rlctl: interrupted", file=sys.stderr)
        return 130
    finally:
        if client is not None:
            client.close()
        if tclient is not None:
            tclient.close()


if __name__ == "__main__":
    sys.exit(main())
