"""A small wrapper over RunService: submit, wait, list, cancel; runs and
sweeps."""

import json
import math
import os
import time

import grpc
import yaml
from google.protobuf import json_format, struct_pb2

from rlservice.security import make_channel
from rlservice.protos import common_pb2, coordinator_pb2, coordinator_pb2_grpc

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")

# watch() and wait() reconnect to a coordinator that went away (a restart)
# after 0.2 s, doubling to 5 s, for up to 60 s of unavailability in a row.
RETRY_INITIAL_S = 0.2
RETRY_MAX_S = 5.0
DEFAULT_RETRY_FOR_S = 60.0
# gRPC's own reconnect backoff grows to 120 s by default, and a call on a
# channel that is backing off fails at once: keep it within ours.
_CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 200),
                    ("grpc.max_reconnect_backoff_ms", 5000)]


class ClientError(Exception):
    """A call failed; `code` is the grpc.StatusCode (None for local errors)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


# A run file is sent as read; the coordinator parses it with the loader
# rl_local uses (runspec/run_spec.h), so a bad file gets the same message
# from rlctl, this client and rl_local. Reading stops past this many bytes,
# more than any run file may have (the coordinator names the real limit):
# a file without end (/dev/zero) is not read for ever.
_MAX_READ_BYTES = 2 << 20


def _read_bounded(path, what, note=""):
    """The first 2 MiB of the file at `path`; ClientError (code None)
    "cannot read WHAT PATH NOTE: why" otherwise."""
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_READ_BYTES)
    except OSError as e:
        raise ClientError(f"cannot read {what} {path}{note}: {e.strerror or e}") from None


def read_run_file(path):
    """The bytes of the run file at `path` (at most 2 MiB of them).
    ClientError (code None) "cannot read run file PATH: why" otherwise."""
    return _read_bounded(path, "run file")


def read_sweep_file(path):
    """What SubmitSweep needs of the sweep file at `path`: (its bytes, its
    name as given, the bytes of the base run file it names, or b"").

    The coordinator does not read the caller's disk, so a `base_run_file`
    is read here: relative to the sweep file's directory, or absolute (as
    rl_local sweep reads it). Only that field is looked at; the sweep file
    is parsed (YAML, JSON for ".json") just to find it, and one that does
    not parse, or also has an inline `base`, is sent as it is for the
    coordinator to name the problem, with rl_local's message. ClientError
    (code None) "cannot read sweep file PATH: why", or "cannot read base
    run file BASE (base_run_file of PATH): why"."""
    path = os.fspath(path)
    data = _read_bounded(path, "sweep file")
    try:
        parsed = json.loads(data) if path.endswith(".json") else yaml.safe_load(data)
    except (ValueError, yaml.YAMLError, RecursionError):
        # UnicodeDecodeError and JSONDecodeError are ValueErrors; a nesting
        # too deep for the Python parsers is a RecursionError.
        return data, path, b""
    base_name = parsed.get("base_run_file") if isinstance(parsed, dict) else None
    if not isinstance(base_name, str) or not base_name or "base" in parsed:
        return data, path, b""
    base_path = (base_name if os.path.isabs(base_name)
                 else os.path.join(os.path.dirname(path), base_name))
    return data, path, _read_bounded(base_path, "base run file",
                                     f" (base_run_file of {path})")


def state_name(state):
    """A RunState's name ("SUCCEEDED") from the number in Run.state."""
    return common_pb2.RunState.Name(state)


def state_value(name):
    """A RunState's number from its name, in any case ("succeeded");
    ClientError (code None) naming the states otherwise."""
    try:
        return common_pb2.RunState.Value(str(name).upper())
    except ValueError:
        names = ", ".join(n.lower() for n in common_pb2.RunState.keys()
                          if n != "RUN_STATE_UNSPECIFIED")
        raise ClientError(f"unknown run state {name!r}: one of {names}") from None


def _run_id(run):
    """A run id from a Run or a string."""
    return run if isinstance(run, str) else run.run_id


def _sweep_id(sweep):
    """A sweep id from a Sweep or a string."""
    return sweep if isinstance(sweep, str) else sweep.sweep_id


class Client:
    """Talks to a coordinator at `address` ("host:port")."""

    def __init__(self, address=None, timeout=10.0, security=None):
        # An empty address given is an error (ClientError), not the default.
        self.address = (address if address is not None
                        else os.environ.get("RL_COORDINATOR", "127.0.0.1:50051"))
        self.timeout = timeout
        try:
            self._channel = make_channel(self.address, _CHANNEL_OPTIONS, security)
        except ValueError as e:
            raise ClientError(str(e)) from None
        self._stub = coordinator_pb2_grpc.RunServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def _call(self, method, request, **kwargs):
        try:
            return method(request, timeout=self.timeout, **kwargs)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _error(self, e):
        """The ClientError for a failed call's grpc.RpcError `e`."""
        code = e.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return ClientError(
                f"coordinator at {self.address} unreachable "
                f"(deadline {self.timeout:g} s): {e.details()}", code)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return ClientError(f"{e.details()} (give --token-file or set RL_TOKEN_FILE)", code)
        return ClientError(e.details(), code)

    def submit(self, path_or_spec, idempotency_key=""):
        """Submits a run file (its path) or a RunSpec; returns the Run.
        A bad file is a ClientError INVALID_ARGUMENT starting with the path."""
        return self.submit_once(path_or_spec, idempotency_key)[0]

    def submit_once(self, path_or_spec, idempotency_key=""):
        """As submit(), and whether the run was created by this call: a
        second submit with the same `idempotency_key` returns the first's
        run and False. Returns (run, created)."""
        request = coordinator_pb2.SubmitRunRequest(idempotency_key=idempotency_key)
        if isinstance(path_or_spec, (str, os.PathLike)):
            path = os.fspath(path_or_spec)
            request.run_file = read_run_file(path)
            request.run_file_name = path
        else:
            request.spec.CopyFrom(path_or_spec)
        response = self._call(self._stub.SubmitRun, request)
        return response.run, response.created

    def get(self, run, with_history=False):
        """The run (a Run or its id) as the coordinator has it now; with
        `with_history`, also its state changes (Run.history)."""
        return self._call(self._stub.GetRun, coordinator_pb2.GetRunRequest(
            run_id=_run_id(run), with_history=with_history))

    def list(self, states=(), page_size=50):
        """All runs (newest first), optionally only those in `states` (names
        in any case, e.g. ["succeeded", "FAILED"])."""
        if isinstance(states, str):
            states = [states]
        request = coordinator_pb2.ListRunsRequest(
            states=[state_value(s) for s in states], page_size=page_size)
        runs = []
        while True:
            response = self._call(self._stub.ListRuns, request)
            runs.extend(response.runs)
            if not response.next_page_token:
                return runs
            request.page_token = response.next_page_token

    def cancel(self, run):
        """Cancels the run (a Run or its id); returns it."""
        return self._call(self._stub.CancelRun,
                          coordinator_pb2.CancelRunRequest(run_id=_run_id(run)))

    def workers(self):
        return self._call(self._stub.ListWorkers, coordinator_pb2.ListWorkersRequest()).workers

    def watch(self, run, timeout=None, *, retry_for=DEFAULT_RETRY_FOR_S, on_unavailable=None,
              on_reconnect=None):
        """Yields the run (a Run or its id) after every change until it
        reaches a final state.

        The stream starts with the run's current state, so one broken by a
        coordinator restart (UNAVAILABLE, or an end before a final state) is
        reopened, after 0.2 s doubling to 5 s; a state may repeat across a
        reconnect. `on_unavailable(message)` is called when an outage starts,
        `on_reconnect(message)` when it ends.
        ClientError UNAVAILABLE once the coordinator has been unreachable for
        `retry_for` seconds in a row (0: no retries), DEADLINE_EXCEEDED when
        the run has not ended after `timeout` seconds (None: no limit).
        """
        if not retry_for >= 0:
            raise ValueError(f"retry_for: must be >= 0 (got {retry_for})")
        run_id = _run_id(run)
        deadline = None if timeout is None else time.monotonic() + timeout
        request = coordinator_pb2.WatchRunRequest(run_id=run_id)
        backoff = RETRY_INITIAL_S
        outage_since = None
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise ClientError(f"run {run_id} not finished after {timeout:g} s",
                                  grpc.StatusCode.DEADLINE_EXCEEDED)
            try:
                for event in self._stub.WatchRun(request, timeout=remaining):
                    if outage_since is not None and on_reconnect is not None:
                        on_reconnect(f"reconnected to the coordinator at {self.address} "
                                     f"after {time.monotonic() - outage_since:.1f} s")
                    outage_since, backoff = None, RETRY_INITIAL_S
                    yield event.run
                    if state_name(event.run.state) in TERMINAL_STATES:
                        return
                details = "the stream ended before the run did"
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                    raise ClientError(f"run {run_id} not finished after {timeout:g} s",
                                      e.code()) from None
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise ClientError(e.details(), e.code()) from None
                details = " ".join((e.details() or "unavailable").split())
            now = time.monotonic()
            if outage_since is None:
                outage_since = now
                if on_unavailable is not None and retry_for > 0:
                    on_unavailable(f"coordinator at {self.address} unavailable ({details}), "
                                   f"retrying for up to {retry_for:g} s")
            if now - outage_since >= retry_for:
                raise ClientError(
                    f"coordinator at {self.address} unreachable for {retry_for:g} s "
                    f"(watching {run_id}): {details}", grpc.StatusCode.UNAVAILABLE)
            pause = min(backoff, outage_since + retry_for - now)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - now))
            time.sleep(pause)
            backoff = min(2 * backoff, RETRY_MAX_S)

    def wait(self, run, timeout=None, *, on_update=None, retry_for=DEFAULT_RETRY_FOR_S,
             on_unavailable=None, on_reconnect=None):
        """Waits for the run (a Run or its id) to reach a final state and
        returns it, through coordinator restarts as watch() does:
        `c.wait(c.submit("examples/cartpole.yaml"))`. ClientError
        DEADLINE_EXCEEDED after `timeout` seconds, UNAVAILABLE after
        `retry_for` s unreachable. `on_update(run)` sees every change."""
        run_id = _run_id(run)
        for run in self.watch(run_id, timeout, retry_for=retry_for,
                              on_unavailable=on_unavailable, on_reconnect=on_reconnect):
            if on_update:
                on_update(run)
            if state_name(run.state) in TERMINAL_STATES:
                return run
        raise ClientError(f"the watch of run {run_id} ended before the run did")

    # --- sweeps (docs/sweeps.md) ---------------------------------------------

    def submit_sweep(self, path, idempotency_key=""):
        """Submits the sweep file at `path`, with the base run file it names
        (read_sweep_file); returns the Sweep. A second submit with the same
        `idempotency_key` returns the sweep the first created. A bad file is
        a ClientError INVALID_ARGUMENT starting with the path; one that
        cannot be read (or its base run file), code None."""
        sweep_file, name, base_run_file = read_sweep_file(path)
        return self._call(self._stub.SubmitSweep, coordinator_pb2.SubmitSweepRequest(
            sweep_file=sweep_file, sweep_file_name=name, base_run_file=base_run_file,
            idempotency_key=idempotency_key))

    def get_sweep(self, sweep):
        """The sweep (a Sweep or its id) as the coordinator has it now, with
        its trials."""
        return self._call(self._stub.GetSweep,
                          coordinator_pb2.GetSweepRequest(sweep_id=_sweep_id(sweep)))

    def list_sweeps(self):
        """The sweeps, newest first (at most 100), with their trials."""
        return list(self._call(self._stub.ListSweeps,
                               coordinator_pb2.ListSweepsRequest()).sweeps)

    def cancel_sweep(self, sweep):
        """Cancels the sweep's (a Sweep or its id) unfinished trials; returns
        it. Idempotent."""
        return self._call(self._stub.CancelSweep,
                          coordinator_pb2.CancelSweepRequest(sweep_id=_sweep_id(sweep)))

    def add_sweep_trial(self, sweep, parameters):
        """A configuration for a sweep (a Sweep or its id) of method
        external: {path: value} (plain Python values or
        google.protobuf.Value). Returns the sweep, its new trials last."""
        request = coordinator_pb2.AddSweepTrialRequest(sweep_id=_sweep_id(sweep))
        for path, value in parameters.items():
            if isinstance(value, struct_pb2.Value):
                request.parameters[path].CopyFrom(value)
            else:
                json_format.ParseDict(value, request.parameters[path])
        return self._call(self._stub.AddSweepTrial, request)

    def poll_sweep(self, sweep, poll_s=1.0, timeout=None, *, retry_for=DEFAULT_RETRY_FOR_S,
                   on_unavailable=None, on_reconnect=None):
        """Yields the sweep (a Sweep or its id) as the coordinator has it,
        asking every `poll_s` seconds for as long as the caller iterates
        (wait_sweep, and the Optuna driver, which adds trials between polls).

        A coordinator that went away (a restart) is asked again at the next
        poll: `on_unavailable(message)` is called when an outage starts,
        `on_reconnect(message)` when it ends. ClientError UNAVAILABLE once it
        has been unreachable for `retry_for` seconds in a row (0: no
        retries), DEADLINE_EXCEEDED after `timeout` seconds (None: no limit);
        ValueError for a `poll_s` that is not finite and > 0.
        """
        check_poll(poll_s, retry_for)
        sweep_id = _sweep_id(sweep)
        deadline = None if timeout is None else time.monotonic() + timeout
        request = coordinator_pb2.GetSweepRequest(sweep_id=sweep_id)
        outage_since = None
        while True:
            call_timeout = self.timeout
            if deadline is not None:
                call_timeout = max(0.001, min(call_timeout, deadline - time.monotonic()))
            try:
                current = self._stub.GetSweep(request, timeout=call_timeout)
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.UNAVAILABLE,
                                    grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise self._error(e) from None
                details = " ".join((e.details() or "unavailable").split())
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise ClientError(f"sweep {sweep_id} not finished after {timeout:g} s",
                                      grpc.StatusCode.DEADLINE_EXCEEDED) from None
                if outage_since is None:
                    outage_since = now
                    if on_unavailable is not None and retry_for > 0:
                        on_unavailable(f"coordinator at {self.address} unavailable ({details}), "
                                       f"retrying for up to {retry_for:g} s")
                if now - outage_since >= retry_for:
                    raise ClientError(
                        f"coordinator at {self.address} unreachable for {retry_for:g} s "
                        f"(waiting for {sweep_id}): {details}",
                        grpc.StatusCode.UNAVAILABLE) from None
            else:
                if outage_since is not None and on_reconnect is not None:
                    on_reconnect(f"reconnected to the coordinator at {self.address} "
                                 f"after {time.monotonic() - outage_since:.1f} s")
                outage_since = None
                yield current
            pause = poll_s
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ClientError(f"sweep {sweep_id} not finished after {timeout:g} s",
                                      grpc.StatusCode.DEADLINE_EXCEEDED)
                pause = min(pause, remaining)
            time.sleep(pause)

    def wait_sweep(self, sweep, timeout=None, on_update=None, poll_s=1.0, *,
                   retry_for=DEFAULT_RETRY_FOR_S, on_unavailable=None, on_reconnect=None):
        """Asks for the sweep (a Sweep or its id) every `poll_s` seconds until
        it reaches a final state, and returns it: `c.wait_sweep(c.submit_sweep(
        "examples/sweeps/cartpole_lr.yaml"))`. `on_update(sweep)` sees it
        first, then whenever it changed.

        Sweeps are polled, not watched: the coordinator has no sweep stream.
        Coordinator outages, `retry_for` and `timeout` as poll_sweep has them.
        """
        last = None
        for current in self.poll_sweep(sweep, poll_s, timeout, retry_for=retry_for,
                                       on_unavailable=on_unavailable,
                                       on_reconnect=on_reconnect):
            if current != last:
                last = current
                if on_update:
                    on_update(current)
            if state_name(current.state) in TERMINAL_STATES:
                return current


def check_poll(poll_s, retry_for):
    """ValueError unless `poll_s` is finite and > 0 and `retry_for` >= 0
    (before anything is sent)."""
    if not (poll_s > 0 and math.isfinite(poll_s)):
        raise ValueError(f"poll_s: must be > 0 and finite (got {poll_s})")
    if not retry_for >= 0:
        raise ValueError(f"retry_for: must be >= 0 (got {retry_for})")


def mean_return(run):
    """The run's mean return of its last 100 episodes; None before any (NaN
    from the learner, or no progress reported at all: 0 with no episodes)."""
    value = run.progress.mean_return
    if math.isnan(value) or (value == 0 and run.progress.episodes == 0):
        return None
    return value
