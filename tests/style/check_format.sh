#!/usr/bin/env bash
# One style: every C++ file of the repository is as clang-format (Debian's clang-format 14,
# .clang-format at the root) would write it. Fix with: clang-format -i $(git ls-files '*.cpp' '*.hpp')
set -euo pipefail
cd "$1"
mapfile -t files < <(find core daemon sampling judges sinks sources config tracking cli tests -name '*.cpp' -o -name '*.hpp' | sort)
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  echo "$out" | head -40
  echo "FAIL: $(echo "$out" | grep -c 'error:') formatting difference(s); run clang-format -i on the files above"
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
