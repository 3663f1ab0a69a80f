# Sourced by scripts/build, scripts/test and scripts/fuzz: how every build tree is configured.
#
# Every tree is built by Ninja through ccache (Debian's ninja-build and ccache) and linked by
# lld. The cache lives outside the clone (CCACHE_DIR, default ~/.cache/ccache, capped at
# CCACHE_MAXSIZE, default 6G: the three trees of scripts/test take about 2 GB), so a fresh
# clone in another folder reuses what an earlier clone compiled: paths under the clone are
# hashed relative to it (CCACHE_BASEDIR) and the build folder is not hashed (CCACHE_NOHASHDIR;
# the debug information of a reused object names the folder it was first compiled in).
# ASSAY_CCACHE=0 builds without the cache.

assay_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${ASSAY_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-6G}"
  export CCACHE_BASEDIR="$assay_root"
  export CCACHE_NOHASHDIR=1
  assay_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  assay_launcher=(-UCMAKE_CXX_COMPILER_LAUNCHER)
fi

# assay_configure DIR [CMAKE_ARGS...]: configures DIR for Ninja (a tree configured earlier for
# another generator is configured afresh; its objects are rebuilt, from the cache).
assay_configure() {
  local dir="$1"
  shift
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; then
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
  cmake -S "$assay_root" -B "$dir" -G Ninja "${assay_launcher[@]}" \
    -DASSAY_LINKER=lld "$@" >/dev/null
}

# The sanitizer trees build at -O1 with line tables only (-g1): what a sanitizer's report needs,
# in less time than RelWithDebInfo's -O2 -g.
assay_sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

# build-asan/: clang-14, AddressSanitizer + UndefinedBehaviorSanitizer, and the libFuzzer
# targets (scripts/test runs the suite in it, scripts/fuzz the fuzzers).
assay_configure_asan() {
  CC=clang-14 CXX=clang++-14 assay_configure build-asan -DASSAY_FUZZ=ON "${assay_sanitizer_flags[@]}"
}

# build-tsan/: g++, ThreadSanitizer (scripts/test builds the threaded unit tests in it).
assay_configure_tsan() {
  assay_configure build-tsan -DASSAY_TSAN=ON "${assay_sanitizer_flags[@]}"
}
