"""Helpers of the Python tests: child processes of the service's binaries,
and a test case of the embedded system."""

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest


def read_port_file(path, process=None, timeout=60, what="process"):
    """Waits for `path` to hold a port; returns it (an int). RuntimeError if
    `process` exits first or nothing comes within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before writing {path}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not write {path} within {timeout} s")
        time.sleep(0.05)


def start(argv, log_path):
    """Starts `argv` with stdout and stderr to `log_path`; returns the Popen
    (its log file as .log)."""
    log = open(log_path, "w")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    process.log = log
    return process


def stop(process, timeout=30):
    """SIGTERM, then waits (SIGKILL after `timeout` s); returns the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    process.log.close()
    return process.returncode


def start_coordinator(directory, *flags):
    """coordinator/coordinator_main on any port with its store and runs in
    `directory` (log: directory/coordinator.log), then `flags`; waits for its
    port. Returns (the Popen, "127.0.0.1:PORT"); stops it and raises
    RuntimeError if it never listens."""
    port_file = os.path.join(directory, "port")
    process = start(
        ["coordinator/coordinator_main", "--port=0", f"--port_file={port_file}",
         f"--store={directory}/c.db", f"--runs_dir={directory}/runs", *flags],
        os.path.join(directory, "coordinator.log"))
    try:
        port = read_port_file(port_file, process, what="coordinator")
    except RuntimeError:
        stop(process)
        raise
    return process, f"127.0.0.1:{port}"


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class EmbeddedServiceTest(unittest.TestCase):
    """A test of the embedded system: a coordinator with local workers
    (LOCAL_WORKERS) in a fresh directory (self.dir, its address
    self.address), the user's token in $RL_TOKEN_FILE; logs(pattern) reads
    its processes' logs."""

    LOCAL_WORKERS = "learners=1,actors=2"
    # With its telemetry child's port in self.telemetry_address.
    WITH_TELEMETRY = False

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        telemetry_port_file = os.path.join(self.dir, "telemetry_port")
        flags = [f"--telemetry_port_file={telemetry_port_file}"] if self.WITH_TELEMETRY else []
        self.coordinator, self.address = start_coordinator(
            self.dir, f"--log_dir={self.dir}/logs", f"--local_workers={self.LOCAL_WORKERS}",
            *flags)
        if self.WITH_TELEMETRY:
            try:
                port = read_port_file(telemetry_port_file, self.coordinator,
                                      what="coordinator (telemetry port)")
            except RuntimeError:
                stop(self.coordinator)
                raise
            self.telemetry_address = f"127.0.0.1:{port}"
        os.environ["RL_TOKEN_FILE"] = f"{self.dir}/runs/auth/user.token"

    def tearDown(self):
        os.environ.pop("RL_TOKEN_FILE", None)
        stop(self.coordinator)
        shutil.rmtree(self.dir, ignore_errors=True)

    def worker_pid(self, binary, worker_name):
        """The pid of this test's local worker `worker_name` (its `binary`:
        learner_main or actor_main)."""
        tokens = f"--tokens={self.dir}/runs/auth/tokens"
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if (argv[0].endswith(binary) and tokens in argv
                    and f"--worker_name={worker_name}" in argv):
                return int(pid)
        self.fail(f"no {binary} process for {worker_name}")

    def logs(self, pattern):
        text = ""
        for path in sorted(glob.glob(os.path.join(self.dir, "logs", pattern))):
            with open(path) as f:
                text += f.read()
        return text
