"""One parser for run files: a table of bad files fed to rl_local, to rlctl
submit and to the Python client (both against a real coordinator, which
parses the file with the same C++ loader as rl_local). Each gets the same
message naming the file and the problem (its field, line and column, or the
limit), exit code 2, never a traceback, in seconds."""

import contextlib
import io
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import grpc

import rlctl
import test_util
from rlservice import Client, ClientError, Security


def run_rlctl(*argv):
    """(exit code, stdout, stderr) of rlctl.main(argv), in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = rlctl.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def billion_laughs():
    """342 bytes of YAML whose aliases expand to 9^9 strings."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    keys = "abcdefghi"
    for prev, key in zip(keys, keys[1:]):
        text += f"{key}: &{key} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    return text


class RunFileTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        cls.coordinator, cls.address = test_util.start_coordinator(
            cls.dir, "--insecure", "--local_telemetry=false")
        cls.client = Client(cls.address, security=Security(insecure=True))

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        test_util.stop(cls.coordinator)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path

    def messages(self, path):
        """The error of rl_local, rlctl submit and Client.submit for the run
        file at `path`, each checked for its exit code and form."""
        start = time.monotonic()
        local = subprocess.run(
            ["trainer/rl_local", "train", f"--run={path}", f"--run_dir={self.dir}/rl_local",
             "--progress=false"], capture_output=True, text=True, timeout=120)
        self.assertEqual(local.returncode, 2, local.stderr)
        self.assertEqual(local.stderr.count("\n"), 1, local.stderr)
        self.assertTrue(local.stderr.startswith("error: "), local.stderr)
        from_local = local.stderr[len("error: "):].rstrip("\n")

        code, out, err = run_rlctl("--coordinator", self.address, "--insecure", "--timeout",
                                   "30", "submit", path)
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(err.count("\n"), 1, err)  # one line, no traceback
        self.assertTrue(err.startswith("rlctl: error: "), err)
        from_rlctl = err[len("rlctl: error: "):].rstrip("\n")

        with self.assertRaises(ClientError) as e:
            self.client.submit(path)
        self.assertIn(e.exception.code, (None, grpc.StatusCode.INVALID_ARGUMENT))
        from_client = str(e.exception)
        self.assertLess(time.monotonic() - start, 60)
        return from_local, from_rlctl, from_client

    def assert_bad(self, path, *fragments):
        """The same message from all three, starting with `path`, with every
        one of `fragments`."""
        from_local, from_rlctl, from_client = self.messages(path)
        self.assertEqual(from_rlctl, rlctl.text(from_client))
        self.assertEqual(from_local, from_client)
        self.assertTrue(from_client.startswith(f"{path}: ") or
                        from_client.startswith(f"cannot read run file {path}"), from_client)
        for fragment in fragments:
            self.assertIn(fragment, from_client)

    def test_fields(self):
        self.assert_bad(self.write("minibatches.yaml",
                                   "env: {id: CartPole-v1}\nppo: {num_minibatches: 3}\n"),
                        "ppo.num_minibatches: must divide")
        self.assert_bad(self.write("typo.yaml", "env: {id: CartPole-v1}\nppo: {learning_rat: 1}\n"),
                        "learning_rat")
        self.assert_bad(self.write("env.json", '{"env": {"id": "Pong-v5"}}'), "env.id")
        self.assert_bad(
            self.write("zeros.yaml", "env: {id: CartPole-v1}\ntotal_env_steps: 0\n"
                       "ppo: {num_epochs: -2}\n"),
            "total_env_steps: must be >= 1 (leave it out for the default) (got 0)",
            "ppo.num_epochs: must be >= 1 (leave it out for the default) (got -2)")
        # Admission: a run whose segments could never be sent or held.
        self.assert_bad(
            self.write("huge.yaml", "env: {id: CartPole-v1}\nenvs_per_actor: 1048576\n"
                       "segment_length: 65536\nppo: {num_minibatches: 1}\n"),
            "envs_per_actor x segment_length", "message limit")

    def test_deep_nesting(self):
        self.assert_bad(self.write("64.yaml", "env: " + "[" * 64 + "]" * 64 + "\n"),
                        "nesting", "64")
        self.assert_bad(self.write("deep.yaml", "env: " + "[" * 100000 + "]" * 100000 + "\n"),
                        "nesting", "64")
        self.assert_bad(
            self.write("deep.json", '{"name": "[[[[", "env": ' + "[" * 100000 + "]" * 100000 + "}"),
            "nesting", "64")

    def test_alias_expansion_is_bounded(self):
        self.assert_bad(self.write("lol.yaml", billion_laughs()), "100000")
        self.assert_bad(self.write("loop.yaml", "env: &a [*a]\n"))

    def test_binary_and_non_utf8(self):
        self.assert_bad(self.write("nul.yaml", b"env: {id: Cart\0Pole-v1}\n"),
                        "line 1, column 15")
        self.assert_bad(self.write("latin1.yaml", "env: {id: CartPole-v1}\nname: caf\xe9\n"
                                   .encode("latin-1")),
                        "line 2, column 10")
        self.assert_bad(self.write("utf16.json", '{"env": {}}'.encode("utf-16")),
                        "line 1, column 1")

    def test_size_is_limited(self):
        self.assert_bad(self.write("big.yaml", "env: {id: CartPole-v1}\n# " + "x" * (1 << 20)),
                        "1048576 bytes")
        # Past what a client sends (2 MiB): still the loader's message.
        self.assert_bad(self.write("bigger.yaml", "# " + "x" * (3 << 20)), "1048576 bytes")
        # Only a bounded prefix is read: a file without end ends quickly.
        self.assert_bad("/dev/zero", "1048576 bytes")

    def test_unreadable_and_malformed(self):
        self.assert_bad(self.dir, "cannot read run file")
        self.assert_bad(os.path.join(self.dir, "missing.yaml"), "cannot read run file")
        self.assert_bad(self.write("list.yaml", "- env\n"))
        self.assert_bad(self.write("syntax.yaml", "env: {id: [\n"))
        self.assert_bad(self.write("syntax.json", '{"env": '))
        self.assert_bad(self.write("seed.yaml", "seed: 99999999999999999999999\n"), "seed")

    def test_check_env_runs_rl_local(self):
        os.environ["RL_LOCAL"] = os.path.abspath("trainer/rl_local")
        code, out, err = run_rlctl("check-env", "examples/cartpole.yaml", "--steps", "200")
        self.assertEqual(code, 0, err)
        self.assertIn("observation: Box(float32, [4])", out)
        self.assertIn("no violation found", out)
        # A bad run file: rl_local's exit code 2 and its one-line error.
        code, out, err = run_rlctl("check-env", self.write("bad.yaml", "env: {id: Nope}\n"))
        self.assertEqual(code, 2, err)
        self.assertIn("env.id", err)

    def test_a_good_file_is_accepted(self):
        path = self.write("ok.yaml", "env: {id: CartPole-v1}\nname: café ✓\n")
        run = self.client.submit(path)
        self.assertEqual(run.spec.name, "café ✓")
        self.assertEqual(self.client.cancel(run).spec.name, "café ✓")


class AddressesAndTerminalTest(unittest.TestCase):
    """Nothing silently rewritten, nothing from the network obeyed."""

    def test_bad_addresses_are_errors(self):
        for flags, fragment in [
                (["--coordinator", ""], "--coordinator: empty"),
                (["--coordinator", "127.0.0.1:99999"], "port in 1-65535"),
                (["--coordinator", "127.0.0.1:0"], "port in 1-65535"),
                (["--coordinator", "no-port"], "not HOST:PORT"),
                (["--telemetry", "127.0.0.1:70000", "metrics", "run-1"], "--telemetry:")]:
            args = flags if "metrics" in flags else flags + ["list"]
            code, out, err = run_rlctl("--timeout", "1", *args)
            self.assertEqual(code, 2, (flags, err))
            self.assertIn(fragment, err, flags)
            self.assertEqual(err.count("\n"), 1, err)  # one line, no traceback

    def test_network_strings_are_escaped(self):
        hostile = "run\x1b[2J\x1b]0;pwned\x07\rX\x7f\x85\u202eevil\u200b"
        shown = rlctl.text(hostile)
        for c in "\x1b\x07\r\x7f\x85\u202e\u200b":
            self.assertNotIn(c, shown)
        self.assertIn("\\x1b[2J", shown)
        self.assertIn("\\u202e", shown)
        self.assertTrue(shown.startswith("run"))
        long = rlctl.text("r" * (1 << 20))
        self.assertLess(len(long), 1100)
        self.assertIn("characters)", long)
        table = rlctl.format_table(["NAME"], [[hostile]])
        self.assertNotIn("\x1b", "\n".join(table))


if __name__ == "__main__":
    unittest.main()
