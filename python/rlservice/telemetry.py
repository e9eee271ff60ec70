"""A small wrapper over TelemetryService: queries, series listings, live tails.

Results are plain Python structures:

  query()        -> [{"name", "labels", "points": [Point(step, wall_time, value)]}]
                    or, with buckets > 0, [{"name", "labels", "buckets": [dict]}]
  list_series()  -> [{"run_id", "name", "labels", "num_points", "last_step"}]
  watch()        -> yields {"name", "labels", "step", "wall_time", "value"}
  latest()       -> {series key: value}

`wall_time` is seconds since the Unix epoch (a float, like time.time()).
Bucket dicts have min_step, max_step, count, min, max, mean (over the finite
values of the bucket; NaN when there are none) and last (the value at the
largest step, whatever it is).
"""

import collections
import datetime
import math
import os
import time

import grpc

from rlservice.security import make_channel

from rlservice.client import ClientError
from rlservice.protos import telemetry_pb2, telemetry_pb2_grpc

DEFAULT_ADDRESS = "127.0.0.1:50052"

Point = collections.namedtuple("Point", ["step", "wall_time", "value"])

AGGREGATIONS = {
    None: telemetry_pb2.AGGREGATION_UNSPECIFIED,
    "": telemetry_pb2.AGGREGATION_UNSPECIFIED,
    "mean": telemetry_pb2.AGGREGATE_MEAN,
    "sum": telemetry_pb2.AGGREGATE_SUM,
    "min": telemetry_pb2.AGGREGATE_MIN,
    "max": telemetry_pb2.AGGREGATE_MAX,
}


def default_address():
    return os.environ.get("RL_TELEMETRY") or DEFAULT_ADDRESS


def series_key(name, labels):
    """"name" or "name{k=v,k=v}" (keys sorted): one string per series."""
    if not labels:
        return name
    return name + "{" + ",".join(f"{k}={labels[k]}" for k in sorted(labels)) + "}"


def _wall_ns(since, now=None):
    """`since` (seconds ago, a timedelta, or a datetime) -> ns since the epoch."""
    if since is None:
        return 0
    if isinstance(since, datetime.datetime):
        return int(since.timestamp() * 1e9)
    if isinstance(since, datetime.timedelta):
        since = since.total_seconds()
    if isinstance(since, bool) or not isinstance(since, (int, float)) or since < 0 \
            or math.isnan(since):
        raise ClientError(f"since: expected seconds ago (>= 0), a timedelta or a "
                          f"datetime, got {since!r}")
    now = time.time() if now is None else now
    return max(1, int((now - since) * 1e9))


def _names(names):
    if names is None:
        return []
    if isinstance(names, str):
        return [names]
    return list(names)


class TelemetryClient:
    """Talks to the telemetry service at `address` ("host:port"; default
    $RL_TELEMETRY, else 127.0.0.1:50052)."""

    def __init__(self, address=None, timeout=10.0, security=None):
        self.address = address if address is not None else default_address()
        self.timeout = timeout
        self._channel = make_channel(
            self.address, [("grpc.max_receive_message_length", 64 << 20)], security,
            flag="--telemetry")
        self._stub = telemetry_pb2_grpc.TelemetryServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _error(self, e):
        code = e.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return ClientError(
                f"no telemetry service at {self.address} (is it running? set "
                f"--telemetry or $RL_TELEMETRY): {e.details()}", code)
        return ClientError(f"telemetry: {e.details()}", code)

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None

    # --- queries ------------------------------------------------------------

    def query_request(self, run_id, names=None, prefix="", min_step=0, max_step=0,
                      since=None, buckets=0, aggregate_labels=(), aggregation="mean"):
        """The QueryRequest proto for query()'s arguments."""
        if not run_id:
            raise ClientError("run_id: empty")
        try:
            agg = AGGREGATIONS[aggregation.lower() if isinstance(aggregation, str)
                               else aggregation]
        except (KeyError, TypeError):
            raise ClientError(f"aggregation: expected one of mean, sum, min, max, "
                              f"got {aggregation!r}") from None
        if isinstance(aggregate_labels, str):
            aggregate_labels = [aggregate_labels]
        return telemetry_pb2.QueryRequest(
            run_id=run_id, names=_names(names), name_prefix=prefix or "",
            min_step=min_step, max_step=max_step, min_wall_time_ns=_wall_ns(since),
            max_buckets=buckets, aggregate_labels=list(aggregate_labels),
            aggregation=agg)

    def query_response(self, run_id, **kwargs):
        """Like query(), but returns the QueryResponse proto (exact ns times)."""
        return self._call(self._stub.Query, self.query_request(run_id, **kwargs))

    def query(self, run_id, names=None, prefix="", min_step=0, max_step=0, since=None,
              buckets=0, aggregate_labels=(), aggregation="mean"):
        """Series of `run_id`: those named in `names` (a name or a list), else
        those whose name starts with `prefix` (empty: all). Steps in
        [min_step, max_step] (max_step 0: no bound); `since`: only points of
        the last `since` seconds (or a timedelta, or from a datetime on).
        `buckets` > 0 downsamples each series to at most that many step
        buckets. `aggregate_labels` (e.g. ["actor"]) merges the series that
        differ only in those label keys with `aggregation` (mean, sum, min,
        max). Raises ClientError (code NOT_FOUND for a run with no metrics)."""
        response = self.query_response(
            run_id, names=names, prefix=prefix, min_step=min_step, max_step=max_step,
            since=since, buckets=buckets, aggregate_labels=aggregate_labels,
            aggregation=aggregation)
        out = []
        for s in response.series:
            item = {"name": s.name, "labels": dict(s.labels)}
            if buckets > 0:
                item["buckets"] = [
                    {"min_step": b.min_step, "max_step": b.max_step, "count": b.count,
                     "min": b.min, "max": b.max, "mean": b.mean, "last": b.last}
                    for b in s.buckets]
            else:
                item["points"] = [Point(p.step, p.wall_time_ns / 1e9, p.value)
                                  for p in s.points]
            out.append(item)
        return out

    def raw_series(self, run_id, names=None, prefix="", min_step=0, max_step=0,
                   since=None, window_points=None):
        """Yields the matching series' raw points as Series protos (exact ns
        wall times), however many there are: when the service refuses the
        whole query as too large (RESOURCE_EXHAUSTED), or when
        `window_points` is given, the step range is split into windows of
        about `window_points` points (default 100000) queried one by one, so
        a series may come in several pieces (in step order)."""
        kwargs = dict(names=names, prefix=prefix, since=since)
        if window_points is None:
            try:
                yield from self.query_response(run_id, min_step=min_step, max_step=max_step,
                                               **kwargs).series
                return
            except ClientError as e:
                if e.code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
            window_points = 100000
        # Plan windows from a downsampled query: cut where the points counted
        # so far (by bucket end) reach window_points.
        plan = self.query_response(run_id, min_step=min_step, max_step=max_step,
                                   buckets=1000, **kwargs)
        ends = sorted((b.max_step, b.count) for s in plan.series for b in s.buckets)
        cuts, counted = [], 0
        for step, count in ends:
            counted += count
            if counted >= window_points and step != 0 and (not cuts or step > cuts[-1]) \
                    and (max_step == 0 or step < max_step):
                cuts.append(step)
                counted = 0
        lo = min_step
        for hi in cuts + [max_step]:
            yield from self.query_response(run_id, min_step=lo, max_step=hi,
                                           **kwargs).series
            lo = hi + 1

    def list_series(self, run_id="", prefix=""):
        """Series of `run_id` (empty: of every run) whose name starts with
        `prefix`: dicts with run_id, name, labels, num_points, last_step."""
        response = self._call(self._stub.ListSeries, telemetry_pb2.ListSeriesRequest(
            run_id=run_id, name_prefix=prefix or ""))
        return [{"run_id": s.run_id, "name": s.name, "labels": dict(s.labels),
                 "num_points": s.num_points, "last_step": s.last_step}
                for s in response.series]

    def latest(self, run_id, names):
        """{series key: last value} of the named series (a name or a list):
        the value at the largest step. The key is the name, or
        "name{k=v,...}" for a series with labels. Series without points are
        left out; ClientError (NOT_FOUND) for a run with no metrics."""
        names = _names(names)
        if not names:
            return {}
        out = {}
        for s in self.query(run_id, names=names, buckets=1):
            if s["buckets"]:
                out[series_key(s["name"], s["labels"])] = s["buckets"][-1]["last"]
        return out

    def watch(self, run_id, names=None, prefix=""):
        """Yields each new point of `run_id`'s matching series as it is stored:
        dicts with name, labels, step, wall_time, value. Runs until the caller
        stops iterating (the call is then cancelled) or the stream fails
        (ClientError)."""
        if not run_id:
            raise ClientError("run_id: empty")
        call = self._stub.Watch(telemetry_pb2.WatchRequest(
            run_id=run_id, names=_names(names), name_prefix=prefix or ""))
        try:
            for p in call:
                yield {"name": p.name, "labels": dict(p.labels), "step": p.step,
                       "wall_time": p.wall_time_ns / 1e9, "value": p.value}
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise self._error(e) from None
        finally:
            call.cancel()
