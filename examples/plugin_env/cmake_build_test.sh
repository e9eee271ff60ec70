#!/usr/bin/env bash
# The plugin example as a user's own repository would have it: its folder
# and the two plugin_api headers copied outside this tree, built with its own
# CMakeLists.txt (no Bazel), checked with rl_local check-env and trained by
# rl_local to the run file's target return.
set -euo pipefail
RUNFILES="${TEST_SRCDIR:-$PWD/..}/rl_service"
[[ -d "$RUNFILES" ]] || RUNFILES="$PWD"
TMP="$(mktemp -d "${TEST_TMPDIR:-/tmp}/chase_repo.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/repo/third_party"
cp "$RUNFILES/examples/plugin_env/chase_env.cc" \
   "$RUNFILES/examples/plugin_env/CMakeLists.txt" \
   "$RUNFILES/examples/plugin_env/chase.yaml" "$TMP/repo/"
cp "$RUNFILES/envs/plugin_api/rl_env_plugin.h" \
   "$RUNFILES/envs/plugin_api/rl_env_plugin.hpp" "$TMP/repo/third_party/"
cmake -S "$TMP/repo" -B "$TMP/build" \
  -DRL_PLUGIN_API_DIR="$TMP/repo/third_party" >"$TMP/cmake.log" 2>&1 ||
  { cat "$TMP/cmake.log"; exit 1; }
cmake --build "$TMP/build" >>"$TMP/cmake.log" 2>&1 ||
  { cat "$TMP/cmake.log"; exit 1; }
# Only the entry point is exported.
exported="$(nm -D --defined-only "$TMP/build/libchase_env.so" | awk '$2 == "T" {print $3}')"
[[ "$exported" == "rl_env_plugin_v1" ]] || { echo "exports: $exported"; exit 1; }

export RL_ENV_PLUGIN_PATH="$TMP/build"
RL_LOCAL="$RUNFILES/trainer/rl_local"
"$RL_LOCAL" check-env --run="$TMP/repo/chase.yaml" --steps=2000 | tee "$TMP/check.txt"
grep -q "no violation found" "$TMP/check.txt"
grep -q "^state: .* played on as the original" "$TMP/check.txt"  # resumes exactly
"$RL_LOCAL" train --run="$TMP/repo/chase.yaml" --run_dir="$TMP/run" \
  --progress=false | tee "$TMP/train.txt"
grep -q "^solved at" "$TMP/train.txt"
echo "PASS: built with CMake outside the tree, checked, trained to the target"
