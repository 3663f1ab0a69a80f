#!/usr/bin/python3
"""SIGTERM while LLM calls are still in flight.

The fake provider answers every call after 20 s; assayd (embedded broker, --replay of the dev
data, an LLM judge, limits.drain_timeout_ms 1000) gets SIGTERM a few seconds after its first
calls. It must stop cleanly within the drain timeout plus the shutdown steps (no crash, exit 0),
say how many LLM calls it abandoned, and write no judgment for an event whose LLM verdict never
came (those events stay uncommitted, so they are judged again after a restart).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402


def main():
    args = tp.common_args()
    workdir = tempfile.mkdtemp(prefix="assay_llm_stop_")
    checks = tp.Checks()
    fake = daemon = None
    try:
        fake, port = tp.start_fake_provider(args.assayd)
        script = json.dumps([{"delay_ms": 20000}] * 64).encode()
        import urllib.request
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/_fake/script", data=script), timeout=5).read()
        admin = tp.free_loopback_port()
        cfg = os.path.join(workdir, "c.yaml")
        jsonl = os.path.join(workdir, "j.jsonl")
        with open(cfg, "w") as f:
            f.write(f"""kafka: {{brokers: embedded, topic: rag.events, group_id: stop}}
sampling: {{rate: 1.0}}
limits: {{drain_timeout_ms: 1000}}
budget: {{daily_limit_eur: 1.0}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
  - {{name: f, kind: llm, criterion: faithfulness, endpoint: "http://127.0.0.1:{port}/v1", model: gpt-4o-mini, max_in_flight: 4}}
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")
        log_path = os.path.join(workdir, "assayd.log")
        log = open(log_path, "wb")
        daemon = subprocess.Popen([args.assayd, "--config", cfg, "--replay", args.data],
                                  stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.time() + 30
        while time.time() < deadline:  # wait until the LLM calls are under way
            status, text = tp.http_get(f"http://127.0.0.1:{admin}/metrics")
            if status == 200 and (tp.metric(tp.parse_metrics(text), "assay_events_judged_total") or 0) > 0:
                break
            time.sleep(0.2)
        time.sleep(1.0)
        t0 = time.time()
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
        took = time.time() - t0
        tp.log(f"assayd stopped {took:.1f} s after SIGTERM with exit code {rc}")
        checks.eq("exit code after SIGTERM", 0, rc)
        checks.true("stopped within 15 s (drain 1 s, then abandon the calls)", took < 15, f"{took:.1f} s")
        with open(log_path, errors="replace") as f:
            text = f.read()
        checks.true("the log says LLM calls were abandoned", "still wait for an asynchronous verdict" in text)
        judged_with_llm = 0
        with open(jsonl) as f:
            for line in f:
                for v in json.loads(line)["verdicts"]:
                    if v["judge"] == "f" and "error" not in v:
                        judged_with_llm += 1
        checks.eq("no LLM verdict was written (every call was still waiting 20 s)", 0, judged_with_llm)
    except (tp.TestFailure, OSError, subprocess.TimeoutExpired) as e:
        checks.true("test ran to the end", False, str(e))
    finally:
        tp.stop_process(daemon, "assayd")
        tp.stop_process(fake, "fake provider")
        checks.report()
        if checks.failed():
            print(tp.tail(os.path.join(workdir, "assayd.log")))
        shutil.rmtree(workdir, ignore_errors=True)
    return checks.finish("SIGTERM with LLM calls in flight stops cleanly")


if __name__ == "__main__":
    sys.exit(main())
