"""What one run through the service took, for tools/gpu_bundle_check.sh.

    service_run_report.py RUN_ID [--compare_steps_per_second=X]

Reads the run from the coordinator ($RL_COORDINATOR, $RL_TOKEN_FILE) and its
series from telemetry ($RL_TELEMETRY): its end state, env steps, wall time
from RUNNING to its end, env steps/s over that time, and where the time went
(the sums of actor/env_seconds, actor/inference_seconds,
actor/segment_send_seconds and learner/update_seconds). With
--compare_steps_per_second (rl_local's figure on the same run file), prints
the ratio. Exits 1 unless the run SUCCEEDED.
"""
import argparse
import sys

from rlservice import Client, TelemetryClient
from rlservice.protos import common_pb2 as states

SPLIT = ("actor/env_seconds", "actor/inference_seconds",
         "actor/segment_send_seconds", "learner/update_seconds")


def seconds(timestamp):
    return timestamp.seconds + timestamp.nanos / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--compare_steps_per_second", type=float, default=0)
    args = parser.parse_args()
    run = Client().get(args.run_id, with_history=True)
    state = states.RunState.Name(run.state)
    running = [seconds(t.time) for t in run.history
               if t.to_state == states.RUNNING]
    if not running:
        print(f"{args.run_id}: {state}, never RUNNING ({run.failure_reason})")
        return 1
    wall = seconds(run.update_time) - running[0]
    steps = run.progress.env_steps
    rate = steps / wall if wall > 0 else 0.0
    print(f"{args.run_id}: {state} at {steps} env steps, mean return "
          f"{run.progress.mean_return:.1f}, {wall:.1f} s from RUNNING to its "
          f"end: {rate:,.0f} env steps/s end to end (the learner's last "
          f"figure {run.progress.steps_per_second:,.0f})")
    if run.failure_reason:
        print(f"reason: {run.failure_reason}")
    totals = {}
    for series in TelemetryClient().raw_series(args.run_id, names=list(SPLIT)):
        totals[series.name] = totals.get(series.name, 0.0) + sum(
            p.value for p in series.points)
    if totals:
        print("time (summed over workers): " + ", ".join(
            f"{name} {totals.get(name, 0.0):.2f} s" for name in SPLIT))
    if args.compare_steps_per_second > 0:
        print(f"service / rl_local on the same run file: "
              f"{rate / args.compare_steps_per_second:.2f}x "
              f"({rate:,.0f} / {args.compare_steps_per_second:,.0f} env steps/s)")
    return 0 if run.state == states.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(main())
