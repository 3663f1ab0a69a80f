# Sourced by scripts/build, scripts/test and scripts/fuzz: how every build tree is configured.
#
# Every tree is built by Ninja through ccache (Debian's ninja-build and ccache) and linked by
# lld. The cache lives outside the clone (CCACHE_DIR, default ~/.cache/ccache, capped at
# CCACHE_MAXSIZE, default 6G: the three trees of scripts/test take about 0.2 GB compressed), so
# a fresh clone in another folder reuses what an earlier clone compiled: paths under the clone are
# hashed relative to it (CCACHE_BASEDIR) and the build folder is not hashed (CCACHE_NOHASHDIR;
# the debug information of a reused object names the folder it was first compiled in).
# Depend mode (CCACHE_DEPEND) takes the included files from the compiler's own dependency file
# instead of running the preprocessor once more on a miss: a cold build/ took 710 CPU-s through
# ccache without it, 552 with it (579 without ccache).
# ASSAY_CCACHE=0 builds without the cache.

assay_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${ASSAY_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache/ccache}"
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-6G}"
  export CCACHE_BASEDIR="$assay_root"
  export CCACHE_NOHASHDIR=1
  export CCACHE_DEPEND=1
  assay_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  assay_launcher=(-UCMAKE_CXX_COMPILER_LAUNCHER)
fi

# assay_configure DIR [CMAKE_ARGS...]: configures DIR for Ninja with the compiler $CXX (a tree
# configured earlier for another generator or compiler is configured afresh; its objects are
# rebuilt, from the cache).
assay_configure() {
  local dir="$1" cxx
  shift
  cxx="$(command -v "${CXX:-c++}")"
  if [ -f "$dir/CMakeCache.txt" ] &&
    { ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt" ||
      ! grep -qxF "CMAKE_CXX_COMPILER:FILEPATH=$cxx" "$dir/CMakeCache.txt"; }; then
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
  CXX="$cxx" cmake -S "$assay_root" -B "$dir" -G Ninja "${assay_launcher[@]}" \
    -DASSAY_LINKER=lld "$@" >/dev/null
}

# build/: g++ (Debian's c++), -O2 with line tables and function names only (-g1): backtraces, perf and a
# sanitizer's report name file and line, and the tree compiles in 579 CPU-s instead of 817 with
# RelWithDebInfo's full -g (variables for a debugger; `cmake -B DIR` alone still gives that).
# The Debian package strips the binaries either way.
assay_configure_plain() {
  CC=cc CXX=c++ assay_configure build -DASSAY_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
}

# The sanitizer trees build at -O1 -g1: what a sanitizer's report needs, in less time.
assay_sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")

# build-asan/: clang-14, AddressSanitizer + UndefinedBehaviorSanitizer, and the libFuzzer
# targets (scripts/test runs the suite in it, scripts/fuzz the fuzzers).
assay_configure_asan() {
  CC=clang-14 CXX=clang++-14 assay_configure build-asan -DASSAY_FUZZ=ON "${assay_sanitizer_flags[@]}"
}

# build-tsan/: g++, ThreadSanitizer (scripts/test builds the threaded unit tests in it).
assay_configure_tsan() {
  CC=cc CXX=c++ assay_configure build-tsan -DASSAY_TSAN=ON "${assay_sanitizer_flags[@]}"
}
