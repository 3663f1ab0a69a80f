#!/usr/bin/python3
"""Back-pressure: a queue of capacity 1 and one worker behind a fast poll thread.

assayd runs on its embedded broker (in-process mock cluster) with --replay of the dev data,
sampling 1.0, limits.queue_capacity 1 and limits.workers 1, twice:
  - limits.when_full: drop_newest. The poll thread never waits for the judges: samples that
    find the queue full are dropped and counted, and every message still finishes (its offset
    is committed), so assayd stops by itself. judged + dropped == sampled, dropped > 0 (the poll
    thread outruns a worker that runs 8 judges per event, ~0.2 ms).
  - limits.when_full: block (the default). The partitions are paused while the queue is full
    and resumed when it drains: nothing is dropped, judged == sampled == consumed, and the
    summary says consumption was paused at least once.
Both: consumed == sampled == number of dev events; JSON Lines lines == judged; exit code 0.
Then block with an LLM judge (the fake provider, 50 ms a call, 4 in flight) behind a queue of 4:
the asynchronous backlog pauses consumption too, so no sample becomes rate_limited ("local
backlog full") and every event with contexts gets a score.
Invoked by ctest with the same arguments as test_pipeline.py (--mock-broker is not used).
"""

import argparse
import json
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


def llm_block(args, tmp, check):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_pipeline as tp
    fake, port = tp.start_fake_provider(args.assayd, "--delay-ms", "50")
    try:
        jsonl = os.path.join(tmp, "llm.jsonl")
        config = os.path.join(tmp, "llm.yaml")
        with open(config, "w") as f:
            f.write(f"""kafka: {{brokers: embedded, topic: bp.llm, group_id: bp-llm, partitions: 2}}
sampling: {{rate: 1.0}}
limits: {{queue_capacity: 4, workers: 1}}
budget: {{daily_limit_eur: 10}}
judges:
  - name: f
    kind: llm
    criterion: faithfulness
    provider: openai
    endpoint: http://127.0.0.1:{port}/v1
    model: gpt-4o-mini
    api_key_env: ASSAY_TEST_LLM_KEY
    max_in_flight: 4
admin: {{listen: "127.0.0.1:{free_port()}"}}
sinks: {{jsonl: {{path: "{jsonl}"}}}}
""")
        env = dict(os.environ, ASSAY_TEST_LLM_KEY="sk-test")
        print("limits.when_full: block, with an LLM judge")
        proc = subprocess.run([args.assayd, "--config", config, "--replay", args.data,
                               "--exit-when-idle", "3"], capture_output=True, text=True,
                              timeout=240, env=env)
        check("exit code", proc.returncode == 0, proc.returncode)
        outcomes = {}
        with open(jsonl) as f:
            for line in f:
                for v in json.loads(line)["verdicts"]:
                    outcomes[v.get("error", "ok")] = outcomes.get(v.get("error", "ok"), 0) + 1
        pauses = re.search(r"consumption paused (\d+) time", proc.stderr)
        check("LLM outcomes: scores and no_context only (no rate_limited)",
              set(outcomes) <= {"ok", "no_context"} and outcomes.get("ok", 0) > 400, outcomes)
        check("consumption was paused by the asynchronous backlog", pauses is not None,
              pauses.group(0) if pauses else proc.stderr[-2000:])
        return f"block with an LLM judge: {outcomes}"
    finally:
        tp.stop_process(fake, "fake provider")


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
        failures = []

        def check(name, ok, detail):
            print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")
            if not ok:
                failures.append(name)

        summary = []
        for mode in ("drop_newest", "block"):
            print(f"limits.when_full: {mode}")
            jsonl = os.path.join(tmp, f"{mode}.jsonl")
            config = os.path.join(tmp, f"{mode}.yaml")
            with open(config, "w") as f:
                f.write(f"""kafka: {{brokers: embedded, topic: bp.events, group_id: bp, partitions: 2}}
sampling: {{rate: 1.0}}
limits: {{queue_capacity: 1, workers: 1, when_full: {mode}}}
judges:
{judges}
admin: {{listen: "127.0.0.1:{free_port()}"}}
sinks: {{jsonl: {{path: "{jsonl}"}}}}
""")
            proc = subprocess.run([args.assayd, "--config", config, "--replay", args.data,
                                   "--exit-when-idle", "2"], capture_output=True, text=True,
                                  timeout=120)
            log = proc.stderr
            m = re.search(r"stopped: consumed (\d+), sampled (\d+), invalid (\d+).*, judged (\d+), "
                          r"dropped (\d+)", log)
            check("exit code", proc.returncode == 0, proc.returncode)
            if not m:
                print(log[-3000:])
                print("FAIL: no 'stopped:' summary line in the log")
                return 1
            consumed, sampled, invalid, judged, dropped = map(int, m.groups())
            pauses = re.search(r"consumption paused (\d+) time", log)
            pauses = int(pauses.group(1)) if pauses else 0
            with open(jsonl) as f:
                lines = sum(1 for _ in f)
            check("consumed == dev events", consumed == events, f"{consumed} vs {events}")
            check("sampled == consumed (rate 1.0)", sampled == consumed, f"{sampled} vs {consumed}")
            check("invalid == 0", invalid == 0, invalid)
            check("judged + dropped == sampled", judged + dropped == sampled,
                  f"{judged} + {dropped} vs {sampled}")
            if mode == "drop_newest":
                check("dropped > 0 (queue of 1 behind a fast poll thread)", dropped > 0, dropped)
                check("never paused", pauses == 0, pauses)
            else:
                check("nothing dropped", dropped == 0, dropped)
                check("consumption was paused (a queue of 1 behind a fast poll thread)",
                      pauses > 0, pauses)
            check("JSON Lines lines == judged", lines == judged, f"{lines} vs {judged}")
            if failures:
                print(log[-3000:])
                return 1
            summary.append(f"{mode}: {judged} judged, {dropped} dropped, {pauses} pauses")
        llm = llm_block(args, tmp, check)
        if failures:
            return 1
        print(f"PASSED: {events} events each; " + "; ".join(summary) + "; " + llm)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
