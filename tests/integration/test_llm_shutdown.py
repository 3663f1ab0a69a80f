#!/usr/bin/python3
"""SIGTERM while LLM calls are still in flight, then a restart that judges them again.

The fake provider answers every call after 20 s; assayd (embedded broker, --replay of the dev
data, an LLM judge, limits.drain_timeout_ms 1000, the budget ledger in a real redis-server) gets
SIGTERM a few seconds after its first calls. It must stop cleanly within the drain timeout plus
the shutdown steps (no crash, exit 0), say how many LLM calls it abandoned, write no judgment
for an event whose LLM verdict never came (those events stay uncommitted), and leave nothing of
those calls in Redis: no reservation held, no (event, judge) lease or verdict. A second run on
the same events and the same Redis, with a provider that answers at once, must then judge them:
ok verdicts from a call, none re-emitted from the store.
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


def redis_keys(port, pattern):
    out = subprocess.run(["redis-cli", "-p", str(port), "--scan", "--pattern", pattern],
                         capture_output=True, text=True, timeout=10).stdout
    return [k for k in out.split() if k]


def redis_held(port):
    """Reservations held in every scope's hash of every day."""
    return sum(int(subprocess.run(["redis-cli", "-p", str(port), "hlen", k], capture_output=True,
                                  text=True, timeout=10).stdout.strip() or 0)
               for k in redis_keys(port, "assay:stop:budget:*:res"))


def main():
    args = tp.common_args()
    workdir = tempfile.mkdtemp(prefix="assay_llm_stop_")
    checks = tp.Checks()
    fake = fast = daemon = redis = None
    try:
        redis, redis_port = tp.start_redis(workdir)
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
budget: {{daily_limit_eur: 1.0, store: "redis://127.0.0.1:{redis_port}/0"}}
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
        def gauge(name):
            status, text = tp.http_get(f"http://127.0.0.1:{admin}/metrics")
            return (tp.metric(tp.parse_metrics(text), name) or 0) if status == 200 else 0

        # The LLM calls are under way (each held 20 s by the provider) and events wait for them.
        tp.wait_for("events judged and events waiting for their LLM verdict",
                    lambda: gauge("assay_events_judged_total") > 0 and
                    gauge("assay_judge_pending_events") > 0, 30, 0.2)
        checks.true("assay_judge_pending_events shows the LLM backlog",
                    gauge("assay_judge_pending_events") > 0, "")
        t0 = time.time()
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
        took = time.time() - t0
        tp.log(f"assayd stopped {took:.1f} s after SIGTERM with exit code {rc}")
        checks.eq("exit code after SIGTERM", 0, rc)
        # Drain 1 s, then abandon the calls: a few seconds. Without abandoning, the stop would
        # wait for the calls' end: the provider holds them 20 s, from a few seconds before the
        # SIGTERM.
        checks.true("stopped within 15 s (drain 1 s, then abandon the calls)", took < 15, f"{took:.1f} s")
        with open(log_path, errors="replace") as f:
            text = f.read()
        checks.true("the log says LLM calls were abandoned", "still wait for an asynchronous verdict" in text)
        # Coverage (issue 31): the abandoned calls and the events dropped at the stop still end
        # in one terminal counter of every judge.
        checks.true("the exit summary: every event in one terminal counter per judge",
                    "coverage: each of the" in text and "a bug: please report" not in text,
                    [l for l in text.splitlines() if "coverage" in l])
        judged_with_llm = 0
        with open(jsonl) as f:
            for line in f:
                for v in json.loads(line)["verdicts"]:
                    if v["judge"] == "f" and "error" not in v:
                        judged_with_llm += 1
        checks.eq("no LLM verdict was written (every call was still waiting 20 s)", 0, judged_with_llm)
        checks.true("the log says the abandoned calls are undone",
                    "reservations released and leases dropped" in text, "")
        checks.eq("Redis: reservations still held", 0, redis_held(redis_port))
        checks.eq("Redis: (event, judge) leases or verdicts left", 0,
                  len(redis_keys(redis_port, "assay:stop:verdict:*")))

        # The restart: the same events, a provider that answers at once.
        fast, fast_port = tp.start_fake_provider(args.assayd)
        with open(cfg) as f:
            text2 = f.read().replace(f"127.0.0.1:{port}/v1", f"127.0.0.1:{fast_port}/v1")
        cfg2, jsonl2 = os.path.join(workdir, "c2.yaml"), os.path.join(workdir, "j2.jsonl")
        with open(cfg2, "w") as f:
            f.write(text2.replace(json.dumps(jsonl), json.dumps(jsonl2)))
        rc2 = subprocess.run([args.assayd, "--config", cfg2, "--replay", args.data,
                              "--exit-when-idle", "3"], capture_output=True, timeout=120).returncode
        checks.eq("restart: exit code", 0, rc2)
        outcomes = {}
        with open(jsonl2) as f:
            for line in f:
                for v in json.loads(line)["verdicts"]:
                    if v["judge"] == "f":
                        outcome = "stored" if v.get("stored") else v.get("error", "ok")
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        tp.log(f"restart: LLM outcomes {outcomes}")
        checks.eq("restart: verdicts re-emitted from the store", 0, outcomes.get("stored", 0))
        checks.true("restart: the abandoned events are judged (ok verdicts)",
                    outcomes.get("ok", 0) >= 400, str(outcomes))
    except (tp.TestFailure, OSError, subprocess.TimeoutExpired) as e:
        checks.true("test ran to the end", False, str(e))
    finally:
        tp.stop_process(daemon, "assayd")
        tp.stop_process(fake, "fake provider")
        tp.stop_process(fast, "fast fake provider")
        tp.stop_process(redis, "redis")
        checks.report()
        if checks.failed():
            print(tp.tail(os.path.join(workdir, "assayd.log")))
        shutil.rmtree(workdir, ignore_errors=True)
    return checks.finish("SIGTERM with LLM calls in flight stops cleanly")


if __name__ == "__main__":
    sys.exit(main())
