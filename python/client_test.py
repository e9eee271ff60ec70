"""The Python client and rlctl against the real coordinator (with local
workers) as child processes."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

import grpc

import rlctl
from rlservice import Client, ClientError


class ClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(cls.dir, "port")
        cls.log = open(os.path.join(cls.dir, "coordinator.log"), "w")
        cls.coordinator = subprocess.Popen(
            ["coordinator/coordinator_main", "--port=0", f"--port_file={port_file}",
             f"--store={cls.dir}/c.db", f"--runs_dir={cls.dir}/runs",
             f"--log_dir={cls.dir}/logs", "--local_workers=learners=1,actors=1"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline or cls.coordinator.poll() is not None:
                raise RuntimeError("coordinator did not start")
            time.sleep(0.05)
        cls.address = "127.0.0.1:" + open(port_file).read().strip()

    @classmethod
    def tearDownClass(cls):
        cls.coordinator.terminate()
        cls.coordinator.wait(timeout=30)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_submit_and_wait(self):
        client = Client(self.address)
        run, created = client.submit("examples/cartpole.yaml", idempotency_key="py-1")
        self.assertTrue(created)
        again, created = client.submit("examples/cartpole.yaml", idempotency_key="py-1")
        self.assertFalse(created)
        self.assertEqual(again.run_id, run.run_id)
        done = client.wait(run.run_id, timeout=240)
        self.assertEqual(done.state, 4)  # SUCCEEDED
        self.assertGreaterEqual(done.progress.mean_return, 475)
        self.assertIn(run.run_id, [r.run_id for r in client.list(states=["SUCCEEDED"])])
        self.assertEqual(rlctl.main(["--coordinator", self.address, "get", run.run_id]), 0)

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
        self.assertIn("ppo.num_minibatches", str(e.exception))
        typo = os.path.join(self.dir, "typo.yaml")
        with open(typo, "w") as f:
            f.write("env: {id: CartPole-v1}\nppo: {learning_rat: 0.1}\n")
        self.assertEqual(rlctl.main(["--coordinator", self.address, "submit", typo]), 2)
        self.assertEqual(rlctl.main(["--coordinator", self.address, "submit", "/no/such.yaml"]), 2)
        self.assertEqual(rlctl.main(["--coordinator", self.address, "cancel", "run-404"]), 3)
        self.assertEqual(
            rlctl.main(["--coordinator", "127.0.0.1:1", "--timeout", "1", "list"]), 4)


if __name__ == "__main__":
    unittest.main()
