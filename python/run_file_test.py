"""Bad run files in rlctl and load_run_file: each one a quick ClientError (rlctl
exit code 2) that names the file and the problem, never a traceback. No
coordinator is needed: the file is read before anything is sent."""

import contextlib
import io
import os
import shutil
import tempfile
import time
import unittest

import rlctl
from rlservice import ClientError, load_run_file

# Nothing listens there; a run file that got through would give exit code 4.
NOWHERE = "127.0.0.1:1"


def run_rlctl(*argv):
    """(exit code, stdout, stderr) of rlctl.main(argv), in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = rlctl.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def billion_laughs(last_key="i"):
    """342 bytes of YAML whose aliases expand to 9^9 strings."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    keys = "abcdefghi"
    for prev, key in zip(keys, keys[1:]):
        text += f"{key}: &{key} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    return text


class RunFileTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path

    def assert_bad(self, path, *fragments):
        """rlctl submit: exit code 2, the file and `fragments` on stderr, in
        seconds; load_run_file: the same message."""
        start = time.monotonic()
        code, out, err = run_rlctl("--coordinator", NOWHERE, "--timeout", "1", "submit", path)
        self.assertEqual(code, 2, err)
        self.assertEqual(out, "")
        self.assertTrue(err.startswith(f"rlctl: error: {path}: "), err)
        self.assertEqual(err.count("\n"), 1, err)  # one line, no traceback
        for fragment in fragments:
            self.assertIn(fragment, err)
        self.assertLess(time.monotonic() - start, 10)
        with self.assertRaises(ClientError) as e:
            load_run_file(path)
        self.assertIsNone(e.exception.code)
        self.assertIn(str(e.exception), err)

    def test_deep_nesting(self):
        # Level 1 is the top-level mapping: env's 63 sequences reach level 64.
        ok_depth = self.write("63.yaml", "env: " + "[" * 63 + "]" * 63 + "\n")
        code, _, err = run_rlctl("--coordinator", NOWHERE, "submit", ok_depth)
        self.assertEqual(code, 2)
        self.assertNotIn("nesting", err)  # a field error instead
        self.assert_bad(self.write("64.yaml", "env: " + "[" * 64 + "]" * 64 + "\n"),
                        "nesting deeper than 64 levels at line 1, column 69")
        self.assert_bad(self.write("deep.yaml", "env: " + "[" * 100000 + "]" * 100000 + "\n"),
                        "nesting deeper than 64 levels at line 1, column 69")
        block = "".join(f"{'  ' * i}k{i}:\n" for i in range(70))
        self.assert_bad(self.write("block.yaml", block),
                        "nesting deeper than 64 levels at line 65")
        # JSON: brackets inside strings do not count; columns count bytes.
        self.assert_bad(
            self.write("deep.json", '{"name": "[[[[", "env": ' + "[" * 100000 + "]" * 100000 + "}"),
            "nesting deeper than 64 levels at line 1, column 88")

    def test_alias_expansion_is_bounded(self):
        self.assert_bad(self.write("lol.yaml", billion_laughs()),
                        "expands to more than 100000 values (YAML aliases?)")
        long_value = ("name: &n " + "x" * 500000 + "\nenv: [" + ", ".join(["*n"] * 20) + "]\n")
        self.assert_bad(self.write("long.yaml", long_value),
                        "expands to more than 8388608 bytes (YAML aliases?)")
        self.assert_bad(self.write("loop.yaml", "env: &a [*a]\n"), "alias *a inside its own anchor")

    def test_binary_and_non_utf8(self):
        self.assert_bad(self.write("nul.yaml", b"env: {id: Cart\0Pole-v1}\n"),
                        "not a text file: byte 0x00 at line 1, column 15")
        self.assert_bad(self.write("elf.yaml", b"\x7fELF\x02\x01\x01\x00"),
                        "not a text file: byte 0x7f at line 1, column 1")
        self.assert_bad(self.write("latin1.yaml", "env: {id: CartPole-v1}\nname: caf\xe9\n"
                                   .encode("latin-1")),
                        "not UTF-8 text: byte 0xe9 at line 2, column 10")
        self.assert_bad(self.write("utf16.json", '{"env": {}}'.encode("utf-16")),
                        "not UTF-8 text: byte 0xff at line 1, column 1")
        # UTF-8 is fine.
        spec = load_run_file(self.write("ok.yaml", "env: {id: CartPole-v1}\nname: café ✓\n"))
        self.assertEqual(spec.name, "café ✓")

    def test_size_is_limited(self):
        self.assert_bad(self.write("big.yaml", "env: {id: CartPole-v1}\n# " + "x" * (1 << 20)),
                        "run file is larger than 1048576 bytes")
        # Only the limit is read: a file without end ends quickly.
        self.assert_bad("/dev/zero", "run file is larger than 1048576 bytes")

    def test_other_bad_files(self):
        self.assert_bad(self.dir, "cannot read run file")
        self.assert_bad(os.path.join(self.dir, "missing.yaml"), "cannot read run file")
        self.assert_bad(self.write("list.yaml", "- env\n"), "expected a mapping")
        self.assert_bad(self.write("syntax.yaml", "env: {id: [\n"), "not valid YAML")
        self.assert_bad(self.write("two.yaml", "env: {}\n---\nenv: {}\n"), "not valid YAML")
        self.assert_bad(self.write("syntax.json", '{"env": '), "not valid JSON")
        self.assert_bad(self.write("date.yaml", "env: {id: CartPole-v1}\nname: 2020-01-01\n"),
                        "name field")
        self.assert_bad(self.write("key.yaml", "env: {id: CartPole-v1}\n1: x\n"), "1 field")
        self.assert_bad(self.write("bin.yaml", "name: !!binary aGVsbG8=\n"), "name field")
        self.assert_bad(self.write("seed.yaml", "seed: 99999999999999999999999\n"), "seed field")

    def test_explicit_zero_counts_are_errors(self):
        self.assert_bad(
            self.write("zeros.yaml", "env: {id: CartPole-v1}\ntotal_env_steps: 0\n"
                       "ppo: {num_epochs: -2}\n"),
            "total_env_steps: must be >= 1 (leave it out for the default) (got 0)",
            "ppo.num_epochs: must be >= 1 (leave it out for the default) (got -2)")
        self.assert_bad(
            self.write("zeros.json", '{"env": {"id": "CartPole-v1"}, "envsPerActor": "0"}'),
            "envs_per_actor: must be >= 1")


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
