"""rlctl: the command-line client of the training service.

  rlctl submit RUN_FILE [--watch] [--key KEY]
  rlctl list [--state STATE]
  rlctl get RUN_ID
  rlctl cancel RUN_ID
  rlctl watch RUN_ID
  rlctl workers

The coordinator's address comes from --coordinator or $RL_COORDINATOR
(default 127.0.0.1:50051). Exit codes: 0 success (a watched run SUCCEEDED),
1 a watched run FAILED or was CANCELLED, 2 bad input (run file, arguments),
3 not found, 4 coordinator unreachable, 5 other errors.
"""

import argparse
import sys
import time

import grpc

from rlservice.client import Client, ClientError, TERMINAL_STATES, mean_return, state_name


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
    p = run.progress
    total = run.spec.total_env_steps or 1
    frac = min(1.0, p.env_steps / total)
    bar = "#" * int(frac * 20) + "-" * (20 - int(frac * 20))
    ret = mean_return(run)
    eta = (total - p.env_steps) / p.steps_per_second if p.steps_per_second > 0 else None
    return (f"{run.run_id} {state_name(run.state):9s} [{bar}] {p.env_steps}/{total} steps"
            f" | {p.steps_per_second:.0f} steps/s | return(100) "
            f"{'-' if ret is None else f'{ret:.1f}'} | v{p.policy_version} | ETA {fmt_duration(eta)}")


def print_run(run):
    print(f"{run.run_id}  {state_name(run.state):9s}  {run.spec.name or '-':20s}  "
          f"{run.spec.env.id:24s}  steps {run.progress.env_steps}"
          + (f"  reason: {run.failure_reason}" if run.failure_reason else ""))


def watch(client, run_id):
    tty = sys.stdout.isatty()
    last = [0.0]

    def show(run):
        if tty:
            sys.stdout.write("\r\033[K" + progress_line(run))
            sys.stdout.flush()
        elif time.monotonic() - last[0] >= 2 or state_name(run.state) in TERMINAL_STATES:
            print(progress_line(run), flush=True)
            last[0] = time.monotonic()

    run = client.wait(run_id, on_update=show)
    if tty:
        print()
    state = state_name(run.state)
    ret = mean_return(run)
    print(f"{run.run_id} {state} after {run.progress.env_steps} steps"
          + (f", mean return {ret:.1f}" if ret is not None else "")
          + (f": {run.failure_reason}" if run.failure_reason else ""))
    return 0 if state == "SUCCEEDED" else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rlctl", description=__doc__.split("\n")[0])
    parser.add_argument("--coordinator", help="host:port (default $RL_COORDINATOR or 127.0.0.1:50051)")
    parser.add_argument("--timeout", type=float, default=10.0, help="deadline of each call, seconds")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("submit", help="submit a run file")
    p.add_argument("run_file")
    p.add_argument("--watch", action="store_true", help="follow the run until it ends")
    p.add_argument("--key", default="", help="idempotency key")
    p = sub.add_parser("list", help="list runs")
    p.add_argument("--state", action="append", default=[], help="only runs in this state")
    for name in ("get", "cancel", "watch"):
        sub.add_parser(name).add_argument("run_id")
    sub.add_parser("workers", help="registered workers")
    args = parser.parse_args(argv)

    client = Client(args.coordinator, timeout=args.timeout)
    try:
        if args.command == "submit":
            run, created = client.submit(args.run_file, args.key)
            print(f"{'submitted' if created else 'already submitted'} {run.run_id}")
            return watch(client, run.run_id) if args.watch else 0
        if args.command == "list":
            for run in client.list(states=[s.upper() for s in args.state]):
                print_run(run)
            return 0
        if args.command == "get":
            print_run(client.get(args.run_id))
            return 0
        if args.command == "cancel":
            print_run(client.cancel(args.run_id))
            return 0
        if args.command == "watch":
            return watch(client, args.run_id)
        if args.command == "workers":
            for w in client.workers():
                role = "learner" if w.capabilities.role == 1 else "actor"
                print(f"{w.worker_id:24s} {role:8s} {w.address or '-':22s} "
                      f"{w.assignment.run_id or 'idle'}")
            return 0
    except ClientError as e:
        print(f"rlctl: error: {e}", file=sys.stderr)
        if e.code is None or e.code == grpc.StatusCode.INVALID_ARGUMENT:
            return 2
        if e.code == grpc.StatusCode.NOT_FOUND:
            return 3
        if e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return 4
        return 5
    except ValueError as e:  # e.g. an unknown state name
        print(f"rlctl: error: {e}", file=sys.stderr)
        return 2
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
