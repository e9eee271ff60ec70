"""The Python client and rlctl against the real coordinator (with local
workers) as child processes."""

import contextlib
import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

import rlctl
import test_util
from rlservice import Client, ClientError, Security, load_policy, state_name


class ClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.coordinator, cls.address = test_util.start_coordinator(
            cls.dir, f"--log_dir={cls.dir}/logs", "--local_workers=learners=1,actors=1")
        # The embedded coordinator locks its doors with tokens it made.
        os.environ["RL_TOKEN_FILE"] = f"{cls.dir}/runs/auth/user.token"

    @classmethod
    def tearDownClass(cls):
        os.environ.pop("RL_TOKEN_FILE", None)
        test_util.stop(cls.coordinator)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_submit_and_wait(self):
        # The README's snippet, as written there: Client() finds the
        # coordinator as `source runs/embedded/env` points at it.
        os.environ["RL_COORDINATOR"] = self.address
        try:
            c = Client()
        finally:
            del os.environ["RL_COORDINATOR"]
        self.assertEqual(c.address, self.address)
        done = c.wait(c.submit("examples/cartpole.yaml"), 240)
        self.assertEqual(state_name(done.state), "SUCCEEDED")
        self.assertGreaterEqual(done.progress.mean_return, 475)
        self.assertEqual(done.owner, "local-user")  # the name of rlctl's token
        self.assertIn(done.run_id, [r.run_id for r in c.list(["succeeded"])])
        self.assertIn(done.run_id, [r.run_id for r in c.list(states="SUCCEEDED")])
        with self.assertRaises(ClientError) as e:
            c.list(["finished"])
        self.assertIsNone(e.exception.code)
        self.assertIn("one of queued, placing, running, succeeded", str(e.exception))
        # An idempotency key: the second submit returns the first's run.
        run, created = c.submit_once("examples/cartpole.yaml", idempotency_key="py-1")
        self.assertTrue(created)
        again, created = c.submit_once("examples/cartpole.yaml", idempotency_key="py-1")
        self.assertFalse(created)
        self.assertEqual(again.run_id, run.run_id)
        self.assertEqual(c.submit("examples/cartpole.yaml", "py-1").run_id, run.run_id)
        self.assertEqual(state_name(c.cancel(run).state), "CANCELLED")
        # rlctl get: times, where the checkpoints go, how the run went.
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.main(["--coordinator", self.address, "get", done.run_id]), 0)
        shown = out.getvalue()
        self.assertIn(f"checkpoints: {self.dir}/runs/{done.run_id}", shown)
        self.assertRegex(shown, r"created \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, updated ")
        self.assertIn("history:", shown)
        self.assertRegex(shown, r"\(new\)\s+-> QUEUED")
        self.assertRegex(shown, r"RUNNING\s+-> SUCCEEDED\s+target return reached at")
        # rlctl export: the trained policy as TorchScript with its sidecar,
        # which rl_local then plays as the checkpoint played.
        os.environ["RL_LOCAL"] = os.path.abspath("trainer/rl_local")
        policy = os.path.join(self.dir, "cartpole.pt")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rlctl.main(["--coordinator", self.address, "export",
                                         done.run_id, "-o", policy]), 0)
        self.assertIn(f"to {policy}", out.getvalue())
        self.assertIn(f"rl_local: {os.environ['RL_LOCAL']} ($RL_LOCAL)", out.getvalue())
        with open(policy + ".json") as f:
            sidecar = json.load(f)
        self.assertEqual([i["name"] for i in sidecar["inputs"]], ["obs"])
        self.assertEqual(sidecar["inputs"][0]["shape"], ["B", 4])
        self.assertEqual([o["name"] for o in sidecar["outputs"]], ["actions", "values"])
        played = subprocess.run(
            ["trainer/rl_local", "eval", "--run=examples/cartpole.yaml", f"--policy={policy}",
             "--episodes=10"], capture_output=True, text=True, check=False)
        self.assertEqual(played.returncode, 0, played.stderr)
        mean = float(re.search(r"mean return ([\d.]+)", played.stdout).group(1))
        self.assertGreaterEqual(mean, 400)
        # load_policy: the same run as an ONNX policy on numpy arrays, which
        # balances Gymnasium's own CartPole as the checkpoint did.
        import gymnasium
        import numpy as np
        loaded = load_policy(done.run_id, client=c, directory=self.dir)
        self.assertEqual(loaded.sidecar["format"], "onnx")
        self.assertIsNone(loaded.initial_state(4))
        envs = gymnasium.vector.SyncVectorEnv(
            [lambda: gymnasium.make("CartPole-v1") for _ in range(4)])
        obs, _ = envs.reset(seed=3)
        returns, totals = np.zeros(4), []
        while len(totals) < 8:
            actions, values = loaded(obs)
            self.assertEqual(actions.dtype, np.int64)
            self.assertEqual(values.shape, (4,))
            obs, reward, terminated, truncated, _ = envs.step(actions)
            returns += reward
            for i in np.flatnonzero(terminated | truncated):
                totals.append(returns[i])
                returns[i] = 0
        self.assertGreaterEqual(np.mean(totals), 400, totals)
        with self.assertRaises(ValueError):
            loaded(obs, mask=np.ones((4, 2), np.uint8))
        # A checkpoint that is not there is named.
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertNotEqual(rlctl.main(["--coordinator", self.address, "export",
                                            done.run_id, "-o", policy, "--checkpoint", "999"]),
                                0)
        self.assertIn("ckpt-000000000999", err.getvalue())

    def test_user_text_is_shown_as_text(self):
        self.assertEqual(rlctl.text("a\x1b[2Jb\rc\u202e"), "a\\x1b[2Jb\\rc\\u202e")
        self.assertEqual(rlctl.text("plain name-1"), "plain name-1")

    def test_doors_are_locked(self):
        # The embedded default made its tokens, readable by their owner only.
        auth = os.path.join(self.dir, "runs", "auth")
        self.assertEqual(os.stat(auth).st_mode & 0o777, 0o700)
        for name in ("tokens", "user.token", "worker.token", "admin.token"):
            self.assertEqual(os.stat(os.path.join(auth, name)).st_mode & 0o777, 0o600, name)
        with self.assertRaises(ClientError) as e:
            Client(self.address, security=Security()).list()
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("--token-file", str(e.exception))
        # A worker's token may not list runs; the refusal does not echo it.
        worker = Security(token_file=os.path.join(auth, "worker.token"))
        with self.assertRaises(ClientError) as e:
            Client(self.address, security=worker).list()
        self.assertEqual(e.exception.code, grpc.StatusCode.PERMISSION_DENIED)
        with open(worker.token_file) as f:
            self.assertNotIn(f.read().strip(), str(e.exception))
        # rlctl finds runs/auth/user.token from where it is started, and
        # without a token it fails with a clear line.
        env = dict(rlctl_env(), RL_TOKEN_FILE="")
        for cwd, refused in ((self.dir, False), (auth, True)):
            done = subprocess.run([sys.executable, "-m", "rlctl", "--coordinator", self.address,
                                   "list"], capture_output=True, text=True, timeout=120,
                                  env=env, cwd=cwd)
            self.assertEqual(done.returncode != 0, refused, done.stderr)
            self.assertEqual("no bearer token" in done.stderr, refused, done.stderr)

    def test_errors_and_exit_codes(self):
        client = Client(self.address)
        with self.assertRaises(ClientError) as e:
            client.get("run-404")
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        bad = os.path.join(self.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("env: {id: CartPole-v1}\nppo: {num_minibatches: 3}\n")
        with self.assertRaises(ClientError) as e:
            client.submit(bad)
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(str(e.exception).startswith(f"{bad}: "), str(e.exception))
        self.assertIn("ppo.num_minibatches", str(e.exception))
        typo = os.path.join(self.dir, "typo.yaml")
        with open(typo, "w") as f:
            f.write("env: {id: CartPole-v1}\nppo: {learning_rat: 0.1}\n")
        self.assertEqual(rlctl.main(["--coordinator", self.address, "submit", typo]), 2)
        self.assertEqual(rlctl.main(["--coordinator", self.address, "submit", "/no/such.yaml"]), 2)
        self.assertEqual(rlctl.main(["--coordinator", self.address, "cancel", "run-404"]), 3)
        # The embedded pool is fixed (1 learner, 1 actor): a run it can never
        # hold is refused at once, naming what it lacks.
        two = os.path.join(self.dir, "two_learners.yaml")
        with open(two, "w") as f:
            f.write("env: {id: CartPole-v1}\nresources: {num_learners: 2}\n")
        with self.assertRaises(ClientError) as e:
            client.submit(two)
        self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("needs 2 learners (cpu): 1 registered or expected in all",
                      str(e.exception))

    def test_a_second_coordinator_on_the_store_is_refused(self):
        # It must not recover runs from a store a live coordinator changes.
        second = subprocess.run(
            ["coordinator/coordinator_main", "--port=0", f"--store={self.dir}/c.db",
             f"--runs_dir={self.dir}/runs2", "--insecure", "--local_telemetry=false"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(second.returncode, 1, second.stderr)
        self.assertIn(f"{self.dir}/c.db is in use by another process", second.stderr)
        self.assertIn(f"coordinator pid {self.coordinator.pid} serving 127.0.0.1:"
                      f"{self.address.rsplit(':', 1)[1]}", second.stderr)
        self.assertEqual(rlctl.main(["--coordinator", self.address, "watch", "run-404"]), 3)
        self.assertEqual(
            rlctl.main(["--coordinator", "127.0.0.1:1", "--timeout", "1", "list"]), 4)

    def test_run_name_is_limited(self):
        # The coordinator validates; rlctl names the file and the field.
        path = os.path.join(self.dir, "long-name.yaml")
        with open(path, "w") as f:
            f.write("env: {id: CartPole-v1}\nname: " + "n" * 129 + "\n")
        code, out, err = run_rlctl("--coordinator", self.address, "submit", path)
        self.assertEqual(code, 2, out + err)
        self.assertIn(f"{path}: ", err)
        self.assertIn("name: at most 128 characters (got 129)", err)


def run_rlctl(*argv):
    """(exit code, stdout, stderr) of rlctl as a child process."""
    done = subprocess.run([sys.executable, "-m", "rlctl", *argv], capture_output=True,
                          text=True, timeout=120, env=rlctl_env())
    return done.returncode, done.stdout, done.stderr


def rlctl_env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


class LineReader:
    """Lines of a child's pipe, read by a thread, waited for with a deadline."""

    def __init__(self, pipe):
        self.lines = []
        self._queue = queue.Queue()
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe):
        for line in pipe:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, fragment, timeout=60):
        """The first line (after those seen) containing `fragment`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {fragment!r} in {timeout} s: {self.lines}")
            if line is None:
                raise AssertionError(f"pipe closed without {fragment!r}: {self.lines}")
            self.lines.append(line)
            if fragment in line:
                return line

    def rest(self, timeout=10):
        """Every line until the pipe closes."""
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                return "".join(self.lines)
            if line is None:
                return "".join(self.lines)
            self.lines.append(line)


class WatchAcrossRestartsTest(unittest.TestCase):
    """`rlctl submit --watch` keeps watching through two coordinator restarts
    (SIGKILL, then a new one on the same port and store) and ends with the
    run's final state, not exit code 4. The
    coordinator has no workers, so the run waits in QUEUED until it is
    cancelled through the third coordinator."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.coordinator = None
        self.port = 0

    def tearDown(self):
        if self.coordinator is not None:
            test_util.stop(self.coordinator)
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_coordinator(self, incarnation):
        port_file = os.path.join(self.dir, f"port{incarnation}")
        self.coordinator = test_util.start(
            ["coordinator/coordinator_main", f"--port={self.port}", f"--port_file={port_file}",
             f"--store={self.dir}/c.db", f"--runs_dir={self.dir}/runs",
             f"--log_dir={self.dir}/logs", "--local_telemetry=false"],
            os.path.join(self.dir, f"coordinator{incarnation}.log"))
        self.port = test_util.read_port_file(port_file, self.coordinator, what="coordinator")
        return f"127.0.0.1:{self.port}"

    def test_submit_watch_survives_restarts(self):
        address = self.start_coordinator(1)
        watcher = subprocess.Popen(
            [sys.executable, "-m", "rlctl", "--coordinator", address, "submit",
             "examples/cartpole.yaml", "--watch"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=rlctl_env())
        try:
            out, err = LineReader(watcher.stdout), LineReader(watcher.stderr)
            run_id = out.wait_for("submitted").split()[1]
            out.wait_for(f"{run_id} QUEUED")  # the watch stream is open
            for incarnation in (2, 3):
                self.coordinator.send_signal(signal.SIGKILL)
                self.coordinator.wait(timeout=30)
                self.coordinator.log.close()
                err.wait_for("unavailable")
                self.assertEqual(self.start_coordinator(incarnation), address)
                err.wait_for("reconnected")
            client = Client(address)
            with self.assertRaises(ClientError) as e:  # still QUEUED
                client.wait(run_id, timeout=0.5)
            self.assertEqual(e.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
            self.assertEqual(client.cancel(run_id).state, 6)  # CANCELLED
            self.assertEqual(watcher.wait(timeout=60), 1)
            self.assertIn(f"{run_id} CANCELLED", out.rest())
            messages = err.rest()
            self.assertEqual(messages.count("unavailable"), 2, messages)  # one per outage
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait()
            watcher.stdout.close()
            watcher.stderr.close()

    def test_watch_gives_up_after_retry_for(self):
        start = time.monotonic()
        code, _, err = run_rlctl("--coordinator", "127.0.0.1:1", "watch", "run-1",
                                 "--retry-for", "1.5")
        self.assertEqual(code, 4, err)
        self.assertGreaterEqual(time.monotonic() - start, 1.5)
        self.assertIn("coordinator at 127.0.0.1:1 unreachable for 1.5 s", err)
        with self.assertRaises(ClientError) as e:
            Client("127.0.0.1:1").wait("run-1", retry_for=0.5)
        self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
