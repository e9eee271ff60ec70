#!/usr/bin/env bash
# Env steps/s of a two-policy run through the service (the embedded system
# of tools/train.sh) with each policy on a gang of two learners of its own
# (resources: {num_learners: 2, learner_per_policy: true}: 4 learners),
# beside one gang of two training both policies (2 learners) and one
# learner per policy (2 learners): LightCycles-v0 red and blue
# (examples/multi_agent/light_cycles_two_policies.yaml), 2 actors, 1M
# steps, interleaved over ROUNDS rounds, one run at a time. Prints each
# run's env steps/s, whether the gangs per policy ended with the same
# weights as the one gang (they train alike, so they should), then the
# ratios of the medians.
#
#   bash bench/policy_learners_speed.sh       # 2 rounds
#   bash bench/policy_learners_speed.sh 3
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-2}"
TMP="$(mktemp -d)"  # the run files
trap 'rm -rf "$TMP"' EXIT
declare -A RESOURCES=(
  [gangs]="{num_actors: 2, num_learners: 2, learner_per_policy: true}"
  [one_gang]="{num_actors: 2, num_learners: 2}"
  [per_policy]="{num_actors: 2, learner_per_policy: true}")
for kind in gangs one_gang per_policy; do
  { cat examples/multi_agent/light_cycles_two_policies.yaml
    echo "resources: ${RESOURCES[$kind]}"; } >"$TMP/$kind.yaml"
done
# The last checkpoint's weights of `policy` (red's are the run's) in run $1.
weights() {
  local dir="runs/embedded/$1/checkpoints"
  [[ "$2" == red ]] || dir="runs/embedded/$1/policies/$2/checkpoints"
  echo "$dir/$(ls "$dir" | grep '^ckpt-' | sort | tail -1)/policy.pt"
}
declare -A RATES
printf '%-11s %5s %12s  %s\n' run round "steps/s" "run"
for round in $(seq 1 "$ROUNDS"); do
  declare -A RUN=()
  for kind in gangs one_gang per_policy; do
    bash tools/train.sh "$TMP/$kind.yaml" >"$TMP/$kind-$round.log" 2>&1 ||
      { tail -20 "$TMP/$kind-$round.log"; exit 1; }
    RUN[$kind]=$(sed -n 's/^\(run-[0-9]*\) SUCCEEDED after.*/\1/p' "$TMP/$kind-$round.log")
    rate=$(grep 'SUCCEEDED \[' "$TMP/$kind-$round.log" | tail -1 |
      sed -n 's/.*| \([0-9]*\) steps\/s |.*/\1/p')
    printf '%-11s %5d %12d  %s\n' "$kind" "$round" "$rate" "${RUN[$kind]}"
    RATES[$kind]="${RATES[$kind]:-} $rate"
  done
  for policy in red blue; do
    if cmp -s "$(weights "${RUN[gangs]}" "$policy")" "$(weights "${RUN[one_gang]}" "$policy")"; then
      echo "round $round: $policy's last weights, gangs per policy vs one gang: the same"
    else
      echo "round $round: $policy's last weights, gangs per policy vs one gang: DIFFER"
    fi
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
G=$(median "${RATES[gangs]}"); O=$(median "${RATES[one_gang]}"); P=$(median "${RATES[per_policy]}")
echo "medians: gangs per policy $G, one gang $O, one learner per policy $P env steps/s"
awk -v g="$G" -v o="$O" -v p="$P" 'BEGIN {
  printf "gangs per policy / one gang: %.2fx; one learner per policy / one gang: %.2fx\n", g / o, p / o }'
