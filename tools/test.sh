#!/usr/bin/env bash
# The README's test command: set up (idempotent), then build and run every
# test of the default configuration. Extra arguments go to `bazel test`,
# e.g. tools/test.sh --config=long to include the long learning tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup.sh
exec bazel test "$@" //...
