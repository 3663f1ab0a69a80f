#!/usr/bin/python3
"""Back-pressure: a queue of capacity 1 and one worker behind a fast poll thread.

assayd runs on its embedded broker (in-process mock cluster) with --replay of the dev data,
sampling 1.0, limits.queue_capacity 1 and limits.workers 1. The poll thread must never block on
the judges: samples that find the queue full are dropped and counted, and every message still
finishes (its offset is committed), so assayd stops by itself.

Asserts from the "stopped:" summary line and the JSON Lines file:
  consumed == sampled == number of dev events; judged + dropped == sampled; dropped > 0 (the
  poll thread outruns a worker that runs 13 judges per event, ~0.2 ms); JSON Lines lines ==
  judged; exit code 0.
Invoked by ctest with the same arguments as test_pipeline.py (--mock-broker is not used).
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assayd", required=True)
    ap.add_argument("--mock-broker")
    ap.add_argument("--data", required=True)
    args = ap.parse_args()

    with open(args.data, "rb") as f:
        events = sum(1 for line in f if line.strip())
    tmp = tempfile.mkdtemp(prefix="assay_backpressure_")
    try:
        jsonl = os.path.join(tmp, "j.jsonl")
        judges = "\n".join(
            f"  - {{name: {n}, kind: {k}, {key}: {n}}}"
            for n, k, key in [
                ("answer_nonempty", "check", "check"), ("cites_source", "check", "check"),
                ("refusal", "check", "check"), ("rouge_l", "lexical", "metric"),
                ("bleu", "lexical", "metric"), ("token_f1", "lexical", "metric"),
                ("context_overlap", "lexical", "metric"), ("question_overlap", "lexical", "metric"),
            ])
        config = os.path.join(tmp, "bp.yaml")
        with open(config, "w") as f:
            f.write(f"""kafka: {{brokers: embedded, topic: bp.events, group_id: bp, partitions: 2}}
sampling: {{rate: 1.0}}
limits: {{queue_capacity: 1, workers: 1}}
judges:
{judges}
admin: {{listen: "127.0.0.1:{free_port()}"}}
sinks: {{jsonl: {{path: "{jsonl}"}}}}
""")
        proc = subprocess.run([args.assayd, "--config", config, "--replay", args.data,
                               "--exit-when-idle", "2"], capture_output=True, text=True, timeout=120)
        log = proc.stderr
        m = re.search(r"stopped: consumed (\d+), sampled (\d+), invalid (\d+).*, judged (\d+), dropped (\d+)", log)
        failures = []

        def check(name, ok, detail):
            print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")
            if not ok:
                failures.append(name)

        check("exit code", proc.returncode == 0, proc.returncode)
        if not m:
            print(log[-3000:])
            print("FAIL: no 'stopped:' summary line in the log")
            return 1
        consumed, sampled, invalid, judged, dropped = map(int, m.groups())
        with open(jsonl) as f:
            lines = sum(1 for _ in f)
        check("consumed == dev events", consumed == events, f"{consumed} vs {events}")
        check("sampled == consumed (rate 1.0)", sampled == consumed, f"{sampled} vs {consumed}")
        check("invalid == 0", invalid == 0, invalid)
        check("judged + dropped == sampled", judged + dropped == sampled, f"{judged} + {dropped} vs {sampled}")
        check("dropped > 0 (queue of 1 behind a fast poll thread)", dropped > 0, dropped)
        check("JSON Lines lines == judged", lines == judged, f"{lines} vs {judged}")
        if failures:
            print(log[-3000:])
            return 1
        print(f"PASSED: {consumed} consumed, {judged} judged, {dropped} dropped on a full queue")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
