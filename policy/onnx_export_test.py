"""Exported ONNX policies run in onnxruntime as the policy runs in LibTorch.

onnx_export_cases writes every kind of policy (Discrete with masks and
normalisation, Box with clipping, MultiDiscrete, Nature and IMPALA CNNs on
uint8 images, an LSTM with masks, a GRU with a Box head, a tanh-squashed
Gaussian, central critics without and beside a GRU) as ONNX, with 1,000
observations (masks, random states) and the policy's own outputs on them.
Each model passes onnx.checker's full check; onnxruntime gives the same
values and next states within 1e-5, the same discrete actions, continuous
actions within 1e-5; a sampled model's draws are never masked actions and
vary from call to call.
"""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np
import onnx
import onnxruntime as ort

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "onnx_export_cases")


class OnnxExportTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        out = subprocess.run([CASES, cls.dir], check=True,
                             capture_output=True, text=True)
        cls.cases = out.stdout.split()

    def load(self, name, tensor):
        path = os.path.join(self.dir, f"{name}.{tensor}.npy")
        return np.load(path) if os.path.exists(path) else None

    def feeds(self, name, session):
        # Observations in the model's declared shape ([B, *shape]).
        shape = [-1] + session.get_inputs()[0].shape[1:]
        feeds = {"obs": self.load(name, "obs").reshape(shape)}
        for tensor in ("mask", "state"):
            value = self.load(name, tensor)
            if value is not None:
                feeds[tensor] = value
        return feeds

    def test_every_case_was_written(self):
        self.assertEqual(len(self.cases), 12, self.cases)

    def test_models_pass_the_checker_and_match_the_policy(self):
        for name in self.cases:
            with self.subTest(case=name):
                path = os.path.join(self.dir, name + ".onnx")
                onnx.checker.check_model(onnx.load(path), full_check=True)
                session = ort.InferenceSession(
                    path, providers=["CPUExecutionProvider"])
                feeds = self.feeds(name, session)
                self.assertEqual(sorted(i.name for i in session.get_inputs()),
                                 sorted(feeds))
                names = [o.name for o in session.get_outputs()]
                outs = dict(zip(names, session.run(None, feeds)))
                want_values = self.load(name, "values")
                value_error = np.abs(outs["values"] - want_values).max()
                print(f"{name}: max |values - policy's| {value_error:.2e}")
                self.assertLessEqual(value_error, 1e-5)
                want_actions = self.load(name, "actions")
                self.assertEqual(outs["actions"].dtype, want_actions.dtype)
                self.assertEqual(outs["actions"].shape, want_actions.shape)
                if want_actions.dtype == np.int64:
                    np.testing.assert_array_equal(outs["actions"],
                                                  want_actions)
                else:
                    self.assertLessEqual(
                        np.abs(outs["actions"] - want_actions).max(), 1e-5)
                want_state = self.load(name, "next_state")
                if want_state is not None:
                    self.assertLessEqual(
                        np.abs(outs["next_state"] - want_state).max(), 1e-5)
                else:
                    self.assertNotIn("next_state", outs)
                if name in ("central_value", "central_gru"):
                    # Acting needs no whole copies: 3 rows, the second
                    # copy incomplete; the first copy's values stand.
                    three = dict(zip(names, session.run(
                        None, {k: v[:3] for k, v in feeds.items()})))
                    np.testing.assert_array_equal(three["actions"],
                                                  want_actions[:3])
                    self.assertLessEqual(
                        np.abs(three["values"][:2] - want_values[:2]).max(),
                        1e-5)
                with open(path + ".json") as f:
                    sidecar = json.load(f)
                self.assertEqual(sidecar["format"], "onnx")
                self.assertEqual([i["name"] for i in sidecar["inputs"]],
                                 [i.name for i in session.get_inputs()])
                self.assertEqual([o["name"] for o in sidecar["outputs"]],
                                 names)

    def test_sampled_models_draw_allowed_actions(self):
        for name in self.cases:
            with self.subTest(case=name):
                path = os.path.join(self.dir, name + ".sampled.onnx")
                onnx.checker.check_model(onnx.load(path), full_check=True)
                session = ort.InferenceSession(
                    path, providers=["CPUExecutionProvider"])
                feeds = self.feeds(name, session)
                first = session.run(["actions"], feeds)[0]
                second = session.run(["actions"], feeds)[0]
                self.assertFalse(np.array_equal(first, second))
                mask = feeds.get("mask")
                if mask is None:
                    continue
                if first.ndim == 1:
                    taken = mask[np.arange(len(first)), first]
                    self.assertTrue(taken.all())


if __name__ == "__main__":
    unittest.main()
