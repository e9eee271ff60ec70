#!/usr/bin/env bash
# Makes .bench-venv: EnvPool 1.2.5 and its dependencies, pinned
# (bench/requirements-envpool.txt), for the benches that compare with it
# (bench/mujoco_env_bench). A measuring instrument only: nothing of the
# service imports it, and the README's commands do not need it.
#   bash tools/bench_venv.sh && bazel run --config=opt //bench:mujoco_env_bench
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.bench-venv"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[bench-venv] creating $VENV"
  /usr/bin/python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
  -r "$ROOT/bench/requirements-envpool.txt"
"$VENV/bin/python" -c "import envpool; print('[bench-venv] envpool', envpool.__version__)"
