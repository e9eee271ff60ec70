"""tools/train.sh's workers from a run file (python/run_file_workers.py):
learners times policies with a learner per policy, both spellings, YAML
and JSON, the 64 cap, and one of each with the reason for a bad file."""

import os
import tempfile
import unittest

from run_file_workers import local_workers


class RunFileWorkersTest(unittest.TestCase):

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_what_the_run_file_asks_for(self):
        self.assertEqual(local_workers(self.write("a.yaml", "env: {id: CartPole-v1}\n")),
                         (1, 1, ""))
        self.assertEqual(local_workers(self.write("b.yaml", (
            "resources: {num_learners: 2, num_actors: 3}\n"))), (2, 3, ""))
        # A learner per policy: one per policy of the block.
        per_policy = self.write("c.yaml", (
            "resources: {num_actors: 2, learner_per_policy: true}\n"
            "policies:\n  - {name: red, agents: [0]}\n"
            "  - {name: blue, agents: [1]}\n  - {name: green, agents: [2]}\n"))
        self.assertEqual(local_workers(per_policy), (3, 2, ""))
        # Without the flag the run's learner trains every policy.
        shared = self.write("d.yaml", (
            "resources: {num_actors: 2}\n"
            "policies: [{name: red, agents: [0]}, {name: blue, agents: [1]}]\n"))
        self.assertEqual(local_workers(shared), (1, 2, ""))
        # A gang of two per policy: 2 x 3.
        gangs = self.write("g.yaml", (
            "resources: {num_learners: 2, num_actors: 2, learner_per_policy: true}\n"
            "policies:\n  - {name: red, agents: [0]}\n"
            "  - {name: blue, agents: [1]}\n  - {name: green, agents: [2]}\n"))
        self.assertEqual(local_workers(gangs), (6, 2, ""))

    def test_both_spellings_json_with_tabs_and_the_cap(self):
        camel = self.write("e.json", (
            '{\n\t"resources": {"numActors": 4, "learnerPerPolicy": true},\n'
            '\t"policies": [{"name": "a"}, {"name": "b"}]\n}\n'))
        self.assertEqual(local_workers(camel), (2, 4, ""))
        many = self.write("f.yaml", "resources: {num_actors: 128, num_learners: 65}\n")
        self.assertEqual(local_workers(many), (64, 64, ""))

    def test_a_file_it_cannot_read_gets_one_of_each_and_why(self):
        learners, actors, problem = local_workers(self.write("g.yaml", "resources: [1\n"))
        self.assertEqual((learners, actors), (1, 1))
        self.assertIn("could not read", problem)
        self.assertIn("while parsing a flow sequence", problem)
        _, _, missing = local_workers(os.path.join(self.dir.name, "none.yaml"))
        self.assertIn("No such file", missing)
        self.assertEqual(local_workers(self.write("h.yaml", "- a\n- b\n"))[:2], (1, 1))
        # Counts that are not numbers are left to rlctl submit to name.
        odd = self.write("i.yaml", "resources: {num_actors: many, num_learners: .inf}\n")
        self.assertEqual(local_workers(odd), (1, 1, ""))


if __name__ == "__main__":
    unittest.main()
