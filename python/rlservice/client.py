"""A small wrapper over RunService: submit, wait, list, cancel."""

import json
import math
import os
import re
import time

import grpc
import yaml
from google.protobuf import json_format

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


# Limits on run files, the same as the C++ loader's (runspec/run_spec.h): a
# real one is a few hundred bytes and three levels deep.
MAX_RUN_FILE_BYTES = 1 << 20
MAX_RUN_FILE_DEPTH = 64  # levels of mappings and sequences; the top is level 1
MAX_RUN_FILE_VALUES = 100000  # after YAML aliases are expanded
MAX_RUN_FILE_EXPANDED_BYTES = 8 << 20  # scalar bytes, after aliases
_MAX_MESSAGE_CHARS = 1000

# Control characters other than tab, LF and CR: in neither YAML nor JSON text.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# JSON strings (closed or not) and brackets.
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def _position(data, offset):
    """"line L, column C" (1-based; columns count bytes) of data[offset]."""
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def _shorten(message):
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[:_MAX_MESSAGE_CHARS] + "..."
    return message


def _one_line(error):
    """A parser's error as one line: "line L, column C: problem" for YAML."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        what = ", ".join(p for p in (error.context, error.problem) if p)
        return _shorten(f"line {mark.line + 1}, column {mark.column + 1}: {what}")
    return _shorten(" ".join(str(error).split()))


def _decode(data):
    """Bytes -> str: UTF-8 without control characters, within the size limit.
    ValueError naming the first bad byte."""
    if len(data) > MAX_RUN_FILE_BYTES:
        raise ValueError(f"run file is larger than {MAX_RUN_FILE_BYTES} bytes")
    control = _CONTROL.search(data)
    try:
        text, not_utf8 = data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        text, not_utf8 = None, e.start
    if control and (not_utf8 is None or control.start() < not_utf8):
        raise ValueError(f"run file is not a text file: byte 0x{data[control.start()]:02x} "
                         f"at {_position(data, control.start())}")
    if not_utf8 is not None:
        raise ValueError(f"run file is not UTF-8 text: byte 0x{data[not_utf8]:02x} at "
                         f"{_position(data, not_utf8)}")
    return text


def _check_json_depth(data):
    depth = 0
    for token in _JSON_TOKEN.finditer(data):
        c = data[token.start()]
        if c in b"[{":
            depth += 1
            if depth > MAX_RUN_FILE_DEPTH:
                raise ValueError(f"run file: nesting deeper than {MAX_RUN_FILE_DEPTH} levels "
                                 f"at {_position(data, token.start())}")
        elif c in b"]}":
            depth -= 1


def _check_yaml_shape(text):
    """Walks the YAML events (nothing is built, nothing recurses) and counts
    what the document expands to, aliases included: levels, values, bytes.
    An alias shares its anchor's object, so a small file can stand for a
    huge tree (a "billion laughs") or an endless one (an alias inside its
    own anchor); the protobuf conversion would walk all of it."""
    anchors = {}  # anchor -> (values, bytes, levels) of its node
    open_nodes = []  # [anchor, values, bytes, levels] of each open collection
    values = scalar_bytes = 0

    def fail(problem, mark):
        raise ValueError(f"run file: {problem} at line {mark.line + 1}, column {mark.column + 1}")

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_nodes) >= MAX_RUN_FILE_DEPTH:
                fail(f"nesting deeper than {MAX_RUN_FILE_DEPTH} levels", event.start_mark)
            open_nodes.append([event.anchor, 1, 0, 1])
            values += 1
            node = None
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, *node = open_nodes.pop()
            if anchor is not None:
                anchors[anchor] = node
        elif isinstance(event, yaml.ScalarEvent):
            node = (1, len(event.value.encode("utf-8")), 0)
            if event.anchor is not None:
                anchors[event.anchor] = node
            values += 1
            scalar_bytes += node[1]
        elif isinstance(event, yaml.AliasEvent):
            node = anchors.get(event.anchor)
            if node is None:
                if any(n[0] == event.anchor for n in open_nodes):
                    fail(f"alias *{event.anchor} inside its own anchor", event.start_mark)
                continue  # undefined: the loader names it
            if len(open_nodes) + node[2] > MAX_RUN_FILE_DEPTH:
                fail(f"nesting deeper than {MAX_RUN_FILE_DEPTH} levels (through alias "
                     f"*{event.anchor})", event.start_mark)
            values += node[0]
            scalar_bytes += node[1]
        else:
            continue
        if values > MAX_RUN_FILE_VALUES:
            fail(f"expands to more than {MAX_RUN_FILE_VALUES} values (YAML aliases?)",
                 event.start_mark)
        if scalar_bytes > MAX_RUN_FILE_EXPANDED_BYTES:
            fail(f"expands to more than {MAX_RUN_FILE_EXPANDED_BYTES} bytes (YAML aliases?)",
                 event.start_mark)
        if node is not None and open_nodes:  # a whole node: add it to its parent
            parent = open_nodes[-1]
            parent[1] += node[0]
            parent[2] += node[1]
            parent[3] = max(parent[3], node[2] + 1)


# Counts that a left-out field takes a default for: written out as 0 or
# less they are an error, not the default (the C++ loader's
# kCountsWithDefaults, runspec/run_spec.cc).
_COUNTS = (("", "total_env_steps"), ("", "envs_per_actor"), ("", "segment_length"),
           ("", "keep_checkpoints"), ("ppo", "num_epochs"), ("ppo", "num_minibatches"),
           ("resources", "num_learners"), ("resources", "num_actors"),
           ("resources", "actor_threads"))


def _camel(name):
    first, *rest = name.split("_")
    return first + "".join(w.capitalize() for w in rest)


def _field(mapping, name):
    for key in (name, _camel(name)):
        if key in mapping:
            return mapping[key]
    return None


def _check_explicit_counts(data):
    """ValueError naming each count written out as 0 or less."""
    problems = []
    for parent, name in _COUNTS:
        obj = _field(data, parent) if parent else data
        if not isinstance(obj, dict):
            continue
        value = _field(obj, name)
        try:
            number = float(value) if isinstance(value, (int, float, str)) else None
        except ValueError:
            number = None  # not a number: the RunSpec parse says so
        if isinstance(value, bool) or number is None or number > 0:
            continue
        path = f"{parent}.{name}" if parent else name
        shown = int(number) if number == int(number) else number
        problems.append(f"{path}: must be >= 1 (leave it out for the default) (got {shown})")
    if problems:
        raise ValueError("; ".join(problems))


def load_run_file(path):
    """Reads a YAML or JSON run file into a RunSpec. Every problem is a
    ClientError (code None) whose message starts with the path and names the
    field, or the line and column, or the limit."""
    is_json = path.endswith(".json")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RUN_FILE_BYTES + 1)  # enough to tell it is too big
    except OSError as e:
        raise ClientError(f"{path}: cannot read run file: {e.strerror or e}") from None
    try:
        text = _decode(data)
        if is_json:
            _check_json_depth(data)
        else:
            _check_yaml_shape(text)
    except ValueError as e:
        raise ClientError(f"{path}: {e}") from None
    except yaml.YAMLError as e:
        raise ClientError(f"{path}: not valid YAML: {_one_line(e)}") from None
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except (ValueError, RecursionError, yaml.YAMLError) as e:
        raise ClientError(
            f"{path}: not valid {'JSON' if is_json else 'YAML'}: {_one_line(e)}") from None
    if not isinstance(data, dict):
        raise ClientError(f"{path}: expected a mapping of fields at the top level")
    try:
        _check_explicit_counts(data)
    except ValueError as e:
        raise ClientError(f"{path}: {e}") from None
    try:
        return json_format.ParseDict(data, common_pb2.RunSpec())
    except (json_format.ParseError, ValueError, TypeError, AttributeError,
            RecursionError) as e:
        raise ClientError(f"{path}: {_one_line(e)}") from None


def state_name(state):
    return common_pb2.RunState.Name(state)


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
            code = e.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ClientError(
                    f"coordinator at {self.address} unreachable "
                    f"(deadline {self.timeout:g} s): {e.details()}", code)
            if code == grpc.StatusCode.UNAUTHENTICATED:
                raise ClientError(
                    f"{e.details()} (give --token-file or set RL_TOKEN_FILE)", code)
            raise ClientError(e.details(), code)

    def submit(self, spec, idempotency_key=""):
        """Submits a RunSpec (or a run-file path); returns (run, created)."""
        path = spec if isinstance(spec, str) else None
        if path is not None:
            spec = load_run_file(path)
        try:
            response = self._call(self._stub.SubmitRun, coordinator_pb2.SubmitRunRequest(
                spec=spec, idempotency_key=idempotency_key))
        except ClientError as e:
            if path is not None and e.code == grpc.StatusCode.INVALID_ARGUMENT:
                raise ClientError(f"{path}: {e}", e.code) from None  # name the file
            raise
        return response.run, response.created

    def get(self, run_id):
        return self._call(self._stub.GetRun, coordinator_pb2.GetRunRequest(run_id=run_id))

    def list(self, states=(), page_size=50):
        """All runs (newest first), optionally only in `states` (names)."""
        request = coordinator_pb2.ListRunsRequest(
            states=[common_pb2.RunState.Value(s) for s in states], page_size=page_size)
        runs = []
        while True:
            response = self._call(self._stub.ListRuns, request)
            runs.extend(response.runs)
            if not response.next_page_token:
                return runs
            request.page_token = response.next_page_token

    def cancel(self, run_id):
        return self._call(self._stub.CancelRun, coordinator_pb2.CancelRunRequest(run_id=run_id))

    def workers(self):
        return self._call(self._stub.ListWorkers, coordinator_pb2.ListWorkersRequest()).workers

    def watch(self, run_id, timeout=None, retry_for=DEFAULT_RETRY_FOR_S, on_unavailable=None,
              on_reconnect=None):
        """Yields the run after every change until it reaches a final state.

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

    def wait(self, run_id, timeout=None, on_update=None, retry_for=DEFAULT_RETRY_FOR_S,
             on_unavailable=None, on_reconnect=None):
        """Waits for a final state and returns the run, through coordinator
        restarts as watch() does. ClientError DEADLINE_EXCEEDED after
        `timeout` seconds, UNAVAILABLE after `retry_for` s unreachable."""
        for run in self.watch(run_id, timeout, retry_for, on_unavailable, on_reconnect):
            if on_update:
                on_update(run)
            if state_name(run.state) in TERMINAL_STATES:
                return run
        raise ClientError(f"the watch of run {run_id} ended before the run did")


def mean_return(run):
    value = run.progress.mean_return
    return None if math.isnan(value) else value
