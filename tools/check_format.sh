#!/usr/bin/env bash
# clang-format (.clang-format: Google style) over the C++ files: those
# changed since BASE when given (tools/check_format.sh origin/main), else
# every tracked one. Lists what is off and exits 1; `clang-format -i FILE`
# fixes a file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if (($# > 0)); then
  mapfile -t files < <(git diff --name-only --diff-filter=d "$1" -- \
    '*.cc' '*.h' '*.cu' ':!third_party')
else
  mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cu' ':!third_party')
fi
if ((${#files[@]} == 0)); then
  echo "format: no C++ files to check"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "format: the files above are not clang-formatted (clang-format -i FILE)" >&2
  exit 1
fi
echo "format: ${#files[@]} files ok"
