#!/usr/bin/env bash
# The one-process trainer (no coordinator, no network): set up, build with
# optimisations, train a run file from scratch on this machine, then evaluate
# the checkpoint it leaves.
#
#   tools/train_local.sh [RUN_FILE] [rl_local flags...]     (default examples/cartpole.yaml)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN_FILE="${1:-examples/cartpole.yaml}"
shift || true
bash tools/setup.sh
bazel build --config=opt //trainer:rl_local
NAME="$(basename "${RUN_FILE%.*}")"
RUN_DIR="$ROOT/runs/$NAME"
rm -rf "$RUN_DIR"
status=0
bazel-bin/trainer/rl_local train --run="$RUN_FILE" --run_dir="$RUN_DIR" "$@" || status=$?
if [[ -d "$RUN_DIR/checkpoints" ]]; then
  bazel-bin/trainer/rl_local eval --run="$RUN_FILE" --checkpoint="$RUN_DIR" --episodes=100
fi
exit "$status"
