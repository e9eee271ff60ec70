#!/usr/bin/env bash
# Learning over seeds: trains RUN_FILE with `rl_local train` (opt build) for
# seeds 1..N, one at a time, and prints per seed whether its target_return
# was reached and at how many env steps (or the mean return of the last 100
# episodes when the budget ran out), the wall time and steps/s; then how
# many seeds reached the target. --full drops the target so every seed runs
# the whole step budget and reports its final mean return (the way CleanRL
# reports returns at 1M steps).
#
#   bash bench/learning_seeds.sh examples/mujoco/half_cheetah.yaml 5
#   bash bench/learning_seeds.sh examples/mujoco/hopper.yaml 3 --full
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RUN="${1:?usage: learning_seeds.sh RUN_FILE [SEEDS] [--full]}"
SEEDS="${2:-5}"
FULL="${3:-}"
[[ -f "$RUN" ]] || { echo "no run file $RUN" >&2; exit 2; }

TMP="$(mktemp -d /tmp/learning_seeds.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
# The opt binary by its own path: bazel-bin follows the last build of any
# configuration on this Bazel server.
bazel build --config=opt //trainer:rl_local >"$TMP/build.log" 2>&1 ||
  { cat "$TMP/build.log"; exit 1; }
RL_LOCAL="$(bazel info --config=opt bazel-bin 2>/dev/null)/trainer/rl_local"

reached=0
echo "$RUN, seeds 1..$SEEDS${FULL:+, the whole budget (no target)}"
for seed in $(seq 1 "$SEEDS"); do
  sed -e "s/^seed: .*/seed: $seed/" "$RUN" >"$TMP/run.yaml"
  grep -q '^seed:' "$TMP/run.yaml" || echo "seed: $seed" >>"$TMP/run.yaml"
  [[ "$FULL" == --full ]] && sed -i '/^target_return/d' "$TMP/run.yaml"
  "$RL_LOCAL" train --run="$TMP/run.yaml" --run_dir="$TMP/run-$seed" \
    --progress=false >"$TMP/seed-$seed.log" 2>&1 || true
  line="$(grep -E '^(solved|NOT solved|finished)' "$TMP/seed-$seed.log" | tail -1)"
  [[ -n "$line" ]] || line="failed: $(tail -1 "$TMP/seed-$seed.log")"
  [[ "$line" == solved* ]] && reached=$((reached + 1))
  echo "  seed $seed: $line"
  grep '^time:' "$TMP/seed-$seed.log" | sed 's/^/          /' || true
done
[[ "$FULL" == --full ]] || echo "reached the target: $reached of $SEEDS seeds"
