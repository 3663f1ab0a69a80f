#!/usr/bin/env bash
# clang-tidy (Debian's clang-tidy 14, .clang-tidy at the root) on every production translation
# unit, from the build's compile_commands.json: bug-prone patterns, needless copies, and no
# function longer than 100 lines. Any finding fails.
# Not analysed: admin_server.cpp and http_client.cpp, whose Boost.Asio coroutines clang 14
# cannot compile against g++ 12's <coroutine> (they build with g++; their functions are short).
set -euo pipefail
src="$1"; build="$2"
cd "$src"
out=$(run-clang-tidy -p "$build" -quiet -j "$(nproc)" \
  "$src/(daemon|sampling|judges|sinks|config)/(?!.*(admin_server|http_client)\.cpp).*\.cpp$" 2>&1) || true
findings=$(echo "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -E '(warning|error): ' | sort -u || true)
if [ -n "$findings" ]; then
  echo "$findings"
  echo "FAIL: $(echo "$findings" | wc -l) clang-tidy finding(s)"
  exit 1
fi
units=$(echo "$out" | grep -c "clang-tidy" || true)
echo "clang_tidy: no finding"
