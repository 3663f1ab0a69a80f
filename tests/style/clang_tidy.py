#!/usr/bin/python3
"""clang-tidy (Debian's clang-tidy 14, .clang-tidy at the root) on every production translation
unit of a build, from its compile_commands.json: bug-prone patterns, needless copies, and no
function longer than 100 lines. Any finding fails.

Not analysed: admin_server.cpp and http_client.cpp, whose Boost.Asio coroutines clang 14 cannot
compile against g++ 12's <coroutine> (they build with g++; their functions are short).

A unit found clean is remembered in a cache (ASSAY_TIDY_CACHE, default ~/.cache/assay/clang-tidy)
under a hash of everything its analysis reads: clang-tidy's version, .clang-tidy, the compile
command (with the clone's folder taken out) and the contents of the source and of every header
it includes, as the build's dependency information lists them (ninja -t deps). A unit whose
hash is cached is not analysed again; a finding is never cached. Without Ninja's dependency
information every unit is analysed.

  clang_tidy.py SOURCE_DIR BUILD_DIR
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys

# Relative to the repository's root.
UNITS = re.compile(r"^(core|daemon|sampling|judges|sinks|sources|config|tracking|cli)/(?!.*(admin_server|http_client)\.cpp).*\.cpp$")
FINDING = re.compile(r"(warning|error): ")


def ninja_deps(build):
    """{object path relative to the build: [absolute dependency paths]}; {} without Ninja."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        return {}
    out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True)
    deps, current = {}, None
    for line in out.stdout.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            target, _, state = line.partition(":")
            current = [] if "(VALID)" in state else None
            if current is not None:
                deps[target] = current
        elif current is not None:
            path = line.strip()
            current.append(path if os.path.isabs(path) else os.path.normpath(os.path.join(build, path)))
    return deps


class Hasher:
    """Content hashes of files, each read once."""

    def __init__(self):
        self.memo = {}

    def file(self, path):
        if path not in self.memo:
            try:
                with open(path, "rb") as f:
                    self.memo[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                self.memo[path] = "missing"
        return self.memo[path]


def unit_key(entry, deps, source, build, base, hasher):
    """The cache key of one unit, or None when its dependencies are unknown."""
    words = entry.get("arguments") or shlex.split(entry["command"])
    output = words[words.index("-o") + 1] if "-o" in words[:-1] else None
    if not output or output not in deps:
        return None
    # Ninja's dependencies are those of the last compile: a file edited since (a new #include
    # in it, hence a header the list lacks) makes them unknown until the unit is built again.
    try:
        built = os.stat(os.path.join(entry.get("directory", build), output)).st_mtime_ns
        if any(os.stat(p).st_mtime_ns > built for p in set(deps[output]) | {entry["file"]}):
            return None
    except OSError:
        return None
    h = hashlib.sha256(base)
    command = shlex.join(words)
    h.update(command.replace(build, "<build>").replace(source, "<source>").encode())
    for path in sorted(set(deps[output]) | {entry["file"]}):
        shown = path.replace(build, "<build>").replace(source, "<source>")
        h.update(f"\0{shown}\0{hasher.file(path)}".encode())
    return h.hexdigest()


def tidy(build, file):
    """clang-tidy's findings for one unit (its output lines that report one)."""
    out = subprocess.run(["clang-tidy", "-p", build, "--quiet", file], capture_output=True, text=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    findings = [line for line in text.splitlines() if FINDING.search(line)]
    if out.returncode != 0 and not findings:
        findings = [f"{file}: clang-tidy exited with {out.returncode}: {text.strip()[-400:]}"]
    return findings


def main():
    source, build = (os.path.realpath(p) for p in sys.argv[1:3])
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = [e for e in json.load(f)
                   if UNITS.search(os.path.relpath(os.path.realpath(e["file"]), source))]
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    with open(os.path.join(source, ".clang-tidy"), "rb") as f:
        base = version.encode() + b"\0" + f.read()
    cache = os.environ.get("ASSAY_TIDY_CACHE") or os.path.expanduser("~/.cache/assay/clang-tidy")
    os.makedirs(cache, exist_ok=True)
    deps, hasher = ninja_deps(build), Hasher()
    todo = []
    for e in entries:
        key = unit_key(e, deps, source, build, base, hasher)
        if key is None or not os.path.exists(os.path.join(cache, key)):
            todo.append((e["file"], key))
    findings = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for (file, key), found in zip(todo, pool.map(lambda t: tidy(build, t[0]), todo)):
            findings += found
            if not found and key:
                open(os.path.join(cache, key), "w").close()
    findings = sorted(set(findings))
    if findings:
        print("\n".join(findings))
        print(f"FAIL: {len(findings)} clang-tidy finding(s)")
        return 1
    print(f"clang_tidy: no finding in {len(entries)} units ({len(entries) - len(todo)} unchanged "
          f"since a clean analysis, cached; {len(todo)} analysed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
