"""rlctl metrics: a run's series from the telemetry service, as a table of
series, tables of step buckets or raw points, or CSV."""

import csv
import itertools
import math
import re
import sys
import time

import grpc

from rlservice.client import ClientError

from rlctl_format import print_table, text


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
    """The run's series: name, labels, points (those in the range given by
    --since, --min-step, --max-step, if any), last step, last value."""
    infos = tclient.list_series(args.run_id)
    if not infos:
        raise not_found(f"run {args.run_id} has no metrics (at {tclient.address})")
    ranged = since is not None or args.min_step or args.max_step
    last = {}
    for s in tclient.query(args.run_id, since=since, min_step=args.min_step,
                           max_step=args.max_step, buckets=1):
        if s["buckets"]:
            b = s["buckets"][-1]
            last[(s["name"], fmt_labels(s["labels"]))] = (
                b["max_step"], b["last"], sum(piece["count"] for piece in s["buckets"]))
    rows = []
    for info in sorted(infos, key=lambda i: (i["name"], fmt_labels(i["labels"]))):
        key = (info["name"], fmt_labels(info["labels"]))
        if key not in last and ranged:
            continue  # no points in the asked range
        step, value, in_range = last.get(key, (None, None, None))
        rows.append([info["name"], key[1] or "-",
                     str(in_range if ranged else info["num_points"]),
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
