#!/usr/bin/env bash
# The layering check passes on this tree and catches a forbidden include.
set -euo pipefail
CHECK="$(dirname "$0")/check_layers.sh"
ROOT="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"

bash "$CHECK" "$ROOT"

bad="$(mktemp -d)"
trap 'rm -rf "$bad"' EXIT
mkdir -p "$bad/learner" "$bad/actor"
printf '#include "actor/rollout_collector.h"\n' >"$bad/learner/core.cc"
printf '#include "learner/ppo_updater.h"\n' >"$bad/actor/client_test.cc"
if out="$(bash "$CHECK" "$bad" 2>&1)"; then
  echo "FAIL: a learner/ file including actor/ passed the check" >&2
  exit 1
fi
grep -q 'learner/ must not include actor/' <<<"$out" || {
  echo "FAIL: the message does not name the rule: $out" >&2
  exit 1
}
# Tests are exempt.
if grep -q 'client_test.cc' <<<"$out"; then
  echo "FAIL: a test file was reported: $out" >&2
  exit 1
fi
echo "PASS"
