#!/usr/bin/env python3
"""Summarises a Chrome trace written by --profile (LibTorch's Kineto).

    tools/trace_summary.py TRACE.json[.gz] [--top N]

Prints, for each category (cpu_op, kernel, cuda_runtime, gpu_memcpy...),
the events' count and total time, then the top N names of the CPU ops and
of the GPU kernels by total time, and how busy the GPU was: the share of
the traced span during which some kernel or copy ran. A GPU that is busy a
small share of the span is waiting for the host (launch-bound).
"""
import argparse
import collections
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def busy_share(intervals, span):
    """The share of `span` covered by the union of `intervals`."""
    covered, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            covered += stop - start
            end = stop
        elif stop > end:
            covered += stop - end
            end = stop
    return covered / span if span > 0 else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    trace = load(args.trace)
    events = [e for e in trace.get("traceEvents", [])
              if e.get("ph") == "X" and "dur" in e]
    if not events:
        sys.exit(f"{args.trace}: no complete (ph X) events")
    by_cat = collections.defaultdict(lambda: [0, 0.0])
    by_name = collections.defaultdict(lambda: [0, 0.0])
    device = []
    for e in events:
        cat = e.get("cat", "?")
        by_cat[cat][0] += 1
        by_cat[cat][1] += e["dur"]
        by_name[(cat, e.get("name", "?"))][0] += 1
        by_name[(cat, e.get("name", "?"))][1] += e["dur"]
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            device.append((e["ts"], e["ts"] + e["dur"]))
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    span = t1 - t0
    print(f"trace {args.trace}: {len(events)} events over {span / 1e3:.1f} ms")
    print(f"{'category':<20} {'events':>8} {'total ms':>10}")
    for cat, (n, dur) in sorted(by_cat.items(), key=lambda kv: -kv[1][1]):
        print(f"{cat:<20} {n:>8} {dur / 1e3:>10.2f}")
    if device:
        print(f"GPU busy {100 * busy_share(device, span):.1f}% of the span "
              f"({len(device)} kernels and copies)")
    for cat in ("cpu_op", "kernel"):
        rows = [(k[1], v) for k, v in by_name.items() if k[0] == cat]
        if not rows:
            continue
        print(f"top {cat} by total time:")
        for name, (n, dur) in sorted(rows, key=lambda r: -r[1][1])[:args.top]:
            print(f"  {dur / 1e3:>9.2f} ms {n:>7}x  {name[:90]}")


if __name__ == "__main__":
    main()
