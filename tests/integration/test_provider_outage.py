#!/usr/bin/python3
"""The LLM endpoint answers 5xx for a while (issue 9, "Neighbours failing").

assayd (a broker process, rate 1.0, a queue of 8 with when_full: block) runs context_overlap and
an LLM judge (the fake provider, 20 ms a call, 4 in flight, max_retries 1) with a memory ledger.
The dev events are produced in three parts: the first is judged normally; the provider then
answers 503 (OpenAI's error body) for --outage-s seconds (8 in CI; the issue's figure is a
minute) while the second part is produced; once the circuit breaker has opened, the outage has
ended and its 30 s pause has passed, the third part is produced. Under limits.when_full: block
(the default) the open breaker holds the calls (issue 28, "Provider outages": nothing lost).
Asserts:
  - the log says the circuit breaker opened and that calls are held, then that it closed (the
    probe call succeeded);
  - assayd stops cleanly on SIGTERM (exit code 0);
  - no call ends as provider_error: every event with contexts is scored, in every part; the
    held calls are counted released (assay_judge_breaker_holds_total), none gave up, and none
    is held at the end;
  - the third part is scored (ok) after the circuit closed; the cheap judge judged everything;
  - the euros in the JSON Lines equal the cost of the billed replies (the scored verdicts).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402


def run(args, workdir, checks):
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        procs.append((broker, "broker"))
        fake, fport = tp.start_fake_provider(args.assayd, "--delay-ms", "20")
        procs.append((fake, "fake provider"))
        events = tp.load_dev_events(args.data)
        third = len(events) // 3
        parts = [events[:third], events[third:2 * third], events[2 * third:]]

        def produce(batch):
            tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, batch)

        jsonl = os.path.join(workdir, "j.jsonl")
        cfg = os.path.join(workdir, "c.yaml")
        admin = tp.free_loopback_port()
        with open(cfg, "w") as f:
            f.write(f"""kafka: {{brokers: {json.dumps(bootstrap)}, topic: {tp.EVENTS_TOPIC}, group_id: outage}}
sampling: {{rate: 1.0}}
limits: {{queue_capacity: 8}}
budget: {{daily_limit_eur: 10}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
  - name: f
    kind: llm
    criterion: faithfulness
    provider: openai
    endpoint: http://127.0.0.1:{fport}/v1
    model: gpt-4o-mini
    api_key_env: ASSAY_TEST_LLM_KEY
    max_in_flight: 4
    max_retries: 1
    timeout_ms: 2000
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")
        log_path = os.path.join(workdir, "assayd.log")
        with open(log_path, "wb") as log:
            daemon = subprocess.Popen([args.assayd, "--config", cfg],
                                      stdout=log, stderr=log, start_new_session=True,
                                      env=dict(os.environ, ASSAY_TEST_LLM_KEY="sk-test"))
        procs.append((daemon, "assayd"))

        def log_has(text):
            with open(log_path, errors="replace") as f:
                return text in f.read()

        def lines():
            with open(jsonl) as f:
                return sum(1 for _ in f)

        produce(parts[0])
        tp.wait_for("the first part judged", lambda: os.path.exists(jsonl) and lines() == len(parts[0]), 60)
        req = urllib.request.Request(f"http://127.0.0.1:{fport}/_fake/outage",
                                     data=json.dumps({"ms": int(args.outage_s * 1000)}).encode())
        urllib.request.urlopen(req, timeout=5).read()
        t0 = time.monotonic()
        produce(parts[1])
        tp.wait_for("the circuit breaker to open", lambda: log_has("circuit breaker open for"), 30)
        opened = time.monotonic()
        checks.true("the circuit opened during the outage", opened - t0 < args.outage_s + 5,
                    f"{opened - t0:.1f} s")
        tp.wait_for("the second part judged", lambda: lines() == len(parts[0]) + len(parts[1]), 60)
        # The breaker stays open 30 s, then lets one probe call through.
        time.sleep(max(0.0, args.outage_s - (time.monotonic() - t0), 30.5 - (time.monotonic() - opened)))
        produce(parts[2])
        tp.wait_for("the circuit breaker to close", lambda: log_has("circuit breaker closed"), 60)
        tp.wait_for("the third part judged", lambda: lines() == len(events), 60)
        checks.true("the log says calls are held", log_has("calls meanwhile are held"))
        status, text = tp.http_get(f"http://127.0.0.1:{admin}/metrics")
        samples = tp.parse_metrics(text) if status == 200 else []
        released = tp.metric(samples, "assay_judge_breaker_holds_total", judge="f", result="released")
        checks.true("held calls were released", (released or 0) > 0, released)
        checks.eq("held calls that gave up", 0,
                  tp.metric(samples, "assay_judge_breaker_holds_total", judge="f", result="gave_up"))
        checks.eq("calls held at the end", 0, tp.metric(samples, "assay_judge_breaker_held", judge="f"))
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
        checks.eq("exit code after SIGTERM", 0, rc)

        overlap, by_part = 0, [dict(), dict(), dict()]
        part_of = {e: i for i, p in enumerate(parts) for e, _ in p}
        cost, unpaid = 0.0, []
        with open(jsonl) as f:
            for line in f:
                j = json.loads(line)
                for v in j["verdicts"]:
                    if v["judge"] == "overlap":
                        overlap += 1
                        continue
                    o = v.get("error", "ok")
                    d = by_part[part_of[j["id"]]]
                    d[o] = d.get(o, 0) + 1
                    cost += v.get("cost_eur", 0)
                    if o == "provider_error" and (v.get("cost_eur", 0) or v.get("input_tokens", 0)):
                        unpaid.append(j["id"])
        tp.log(f"LLM outcomes by part: {by_part}")
        checks.eq("the cheap judge judged every event", len(events), overlap)
        checks.eq("calls that ended as provider_error (the breaker holds them)", [0, 0, 0],
                  [d.get("provider_error", 0) for d in by_part])
        for i, part in enumerate(parts):
            checks.eq(f"part {i + 1}: every event with contexts scored",
                      len(part) - by_part[i].get("no_context", 0), by_part[i].get("ok", 0))
        checks.eq("provider_error verdicts charged", [], unpaid)
        # Calls that arrive while the probe is in flight (half-open) wait for its answer.
        checks.eq("the third part is scored after the circuit closed (every event with contexts)",
                  len(parts[2]) - by_part[2].get("no_context", 0), by_part[2].get("ok", 0))
        scored = sum(d.get("ok", 0) for d in by_part)
        checks.true("euros in the JSON Lines come from scored verdicts only", cost > 0 and scored > 0,
                    f"{cost} EUR, {scored} scored")
        return f"provider down {args.outage_s:.0f} s: outcomes by part {by_part}"
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_provider_outage", run, tp.common_args(("--outage-s", float, 8))))
