"""The local workers a run file asks for, as tools/train.sh starts them:
`--local_workers=learners=N,actors=M`.

N is resources.num_learners, times the number of policies with
resources.learner_per_policy (as runspec/run_spec.cc LearnerProcesses
counts them); M is resources.num_actors; 1 each by default, each at most
64 (what --local_workers takes; a run of more actors starts with
resources.min_actors of them, or waits naming what it needs). Run files
take snake_case and lowerCamelCase names, YAML or JSON (.json). A file
that cannot be read gets one of each and a line on stderr saying why:
`rlctl submit` then names what is wrong with it.

  python run_file_workers.py RUN_FILE
"""

import json
import sys

import yaml

MAX_WORKERS = 64  # coordinator/local_workers.cc


def _field(block, name):
    camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
    return block.get(name, block.get(camel))


def _count(value):
    """A positive count, or 1 for an absent or unreadable one."""
    try:
        return max(1, int(value or 1))
    except (TypeError, ValueError, OverflowError):
        return 1


def local_workers(path):
    """(learners, actors, problem): problem is "" or why one of each."""
    try:
        with open(path) as f:
            text = f.read()
        # JSON for .json files (tabs are JSON, not YAML); YAML else.
        spec = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001: any reason is reported, none raised
        first = (str(e).splitlines() or [type(e).__name__])[0]
        return 1, 1, f"could not read {path} ({first})"
    if not isinstance(spec, dict):
        return 1, 1, f"{path} is not a run file (no mapping at its top)"
    resources = _field(spec, "resources")
    if not isinstance(resources, dict):
        resources = {}
    learners = _count(_field(resources, "num_learners"))
    policies = _field(spec, "policies")
    if _field(resources, "learner_per_policy") and isinstance(policies, list):
        learners *= max(1, len(policies))
    actors = _count(_field(resources, "num_actors"))
    return min(learners, MAX_WORKERS), min(actors, MAX_WORKERS), ""


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    learners, actors, problem = local_workers(argv[1])
    if problem:
        print(f"train.sh: {problem}; one learner, one actor", file=sys.stderr)
    print(f"--local_workers=learners={learners},actors={actors}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
