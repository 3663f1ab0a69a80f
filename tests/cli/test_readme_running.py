#!/usr/bin/python3
"""README.md's "Running it for real" block, command by command as written (scripts/build
excepted: ctest has built the binaries), in a scratch tree laid out like the repository: config/
a copy of the source's (demo.yaml's admin port a free one), build/ this build directory,
../shared/data the labelled data. Each command
must exit 0, assayd must consume and judge every replayed event, and the sequence must end with
a real report and calibration (issue 10: an operator's run consumed nothing, then `assay
report` exited 2 on the empty judgments file).

  test_readme_running.py --source DIR --build DIR --data DIR
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile


def readme_block(source):
    """The first ```sh block of the section, its continued lines joined."""
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^## Running it for real\n(.*?)^## ", text, re.S | re.M)
    if not section:
        sys.exit("FAIL: README.md has no '## Running it for real' section")
    block = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    if not block:
        sys.exit("FAIL: no ```sh block in 'Running it for real'")
    commands, current = [], ""
    for line in block.group(1).splitlines():
        current += line
        if line.endswith("\\"):
            current = current[:-1]
            continue
        if current.strip():
            commands.append(current)
        current = ""
    return commands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    events = os.path.join(args.data, "rag_events_dev.jsonl")
    if not os.path.isfile(events):
        print(f"SKIP: no {events}")
        return 0
    with open(events, encoding="utf-8") as f:
        n_events = sum(1 for line in f if line.strip())
    commands = readme_block(args.source)
    if not commands or not commands[0].startswith("scripts/build"):
        sys.exit(f"FAIL: the block should start with scripts/build: {commands[:1]}")
    with tempfile.TemporaryDirectory(prefix="assay_readme_") as scratch:
        repo = os.path.join(scratch, "main")
        os.makedirs(os.path.join(scratch, "shared"))
        os.makedirs(repo)
        os.symlink(os.path.abspath(args.data), os.path.join(scratch, "shared", "data"))
        # config/ is the source's, but for the admin port of demo.yaml: a free one, so that a
        # demo or another checkout's suite running on the machine cannot fail this test.
        shutil.copytree(os.path.join(os.path.abspath(args.source), "config"),
                        os.path.join(repo, "config"))
        demo = os.path.join(repo, "config", "demo.yaml")
        with open(demo) as f:
            text = f.read()
        if "listen: 127.0.0.1:10464" not in text:
            sys.exit("FAIL: config/demo.yaml no longer has admin.listen: 127.0.0.1:10464")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with open(demo, "w") as f:
            f.write(text.replace("listen: 127.0.0.1:10464", f"listen: 127.0.0.1:{port}"))
        os.symlink(os.path.abspath(args.build), os.path.join(repo, "build"))
        judgments = os.path.join(args.build, "demo", "judgments.jsonl")
        if os.path.exists(judgments):
            os.remove(judgments)  # the block appends; start from what a fresh build has
        outputs = []
        for command in commands[1:]:
            print(f"$ {command}", flush=True)
            p = subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True,
                               text=True, timeout=120)
            print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
            if p.returncode != 0:
                sys.exit(f"FAIL: exit {p.returncode}: {command}")
            outputs.append((command, p.stdout, p.stderr))

    def output_of(prefix):
        for command, out, err in outputs:
            if command.startswith(prefix):
                return out, err
        sys.exit(f"FAIL: no command starting with '{prefix}' in the block")

    _, err = output_of("build/daemon/assayd --config")
    if f"stopped: consumed {n_events}, sampled {n_events}" not in err:
        sys.exit(f"FAIL: assayd did not consume and sample the {n_events} events")
    out, _ = output_of("build/daemon/assay report")
    if f"judgments: {n_events} events in build/demo/judgments.jsonl" not in out:
        sys.exit("FAIL: assay report did not report the judgments")
    if not re.search(r"context_overlap +faithfulness +runs +\d+: ", out):
        sys.exit("FAIL: no per-judge line in the report")
    out, _ = output_of("build/daemon/assay calibrate")
    if not re.search(r"\nverdict: \w", out):
        sys.exit("FAIL: assay calibrate gave no verdict")
    out, _ = output_of("build/daemon/assay estimate")
    if "\ntotal " not in out:
        sys.exit("FAIL: assay estimate printed no total")
    print("PASS: the README's 'Running it for real' block, as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
