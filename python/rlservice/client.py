"""A small wrapper over RunService: submit, wait, list, cancel."""

import json
import math
import os
import time

import grpc
import yaml
from google.protobuf import json_format

from rlservice.protos import common_pb2, coordinator_pb2, coordinator_pb2_grpc

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


class ClientError(Exception):
    """A call failed; `code` is the grpc.StatusCode (None for local errors)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


def load_run_file(path):
    """Reads a YAML or JSON run file into a RunSpec (field errors name the path)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise ClientError(f"cannot read run file {path}: {e.strerror}")
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise ClientError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'YAML'}: {e}")
    if not isinstance(data, dict):
        raise ClientError(f"{path}: expected a mapping of fields at the top level")
    try:
        return json_format.ParseDict(data, common_pb2.RunSpec())
    except json_format.ParseError as e:
        raise ClientError(f"{path}: {e}")


def state_name(state):
    return common_pb2.RunState.Name(state)


class Client:
    """Talks to a coordinator at `address` ("host:port")."""

    def __init__(self, address=None, timeout=10.0):
        self.address = address or os.environ.get("RL_COORDINATOR", "127.0.0.1:50051")
        self.timeout = timeout
        self._channel = grpc.insecure_channel(self.address)
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
            raise ClientError(e.details(), code)

    def submit(self, spec, idempotency_key=""):
        """Submits a RunSpec (or a run-file path); returns (run, created)."""
        if isinstance(spec, str):
            spec = load_run_file(spec)
        response = self._call(self._stub.SubmitRun, coordinator_pb2.SubmitRunRequest(
            spec=spec, idempotency_key=idempotency_key))
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

    def watch(self, run_id):
        """Yields the run after every change until it reaches a final state."""
        try:
            for event in self._stub.WatchRun(coordinator_pb2.WatchRunRequest(run_id=run_id)):
                yield event.run
        except grpc.RpcError as e:
            raise ClientError(e.details(), e.code())

    def wait(self, run_id, timeout=None, on_update=None):
        """Waits for a final state; returns the run. Raises ClientError on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for run in self.watch(run_id):
                if on_update:
                    on_update(run)
                if state_name(run.state) in TERMINAL_STATES:
                    return run
                if deadline is not None and time.monotonic() > deadline:
                    raise ClientError(f"run {run_id} not finished after {timeout} s")
            run = self.get(run_id)  # Stream ended early (coordinator restart).
            if state_name(run.state) in TERMINAL_STATES:
                return run
            time.sleep(0.5)


def mean_return(run):
    value = run.progress.mean_return
    return None if math.isnan(value) else value
