"""The Python client and rlctl against the real coordinator (with local
workers) as child processes."""

import os
import shutil
import tempfile
import unittest

import grpc

import rlctl
import test_util
from rlservice import Client, ClientError


class ClientTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(cls.dir, "port")
        cls.coordinator = test_util.start(
            ["coordinator/coordinator_main", "--port=0", f"--port_file={port_file}",
             f"--store={cls.dir}/c.db", f"--runs_dir={cls.dir}/runs",
             f"--log_dir={cls.dir}/logs", "--local_workers=learners=1,actors=1"],
            os.path.join(cls.dir, "coordinator.log"))
        try:
            port = test_util.read_port_file(port_file, cls.coordinator, what="coordinator")
        except RuntimeError:
            test_util.stop(cls.coordinator)
            raise
        cls.address = f"127.0.0.1:{port}"

    @classmethod
    def tearDownClass(cls):
        test_util.stop(cls.coordinator)
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
