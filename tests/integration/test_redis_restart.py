#!/usr/bin/python3
"""redis-server restarts empty in the middle of a run (issue 9, "Neighbours failing").

assayd (embedded broker, --replay of the dev data, rate 1.0) runs context_overlap and an LLM
judge (the fake provider, 40 ms a call, 4 in flight) with its budget ledger and verdict store in
a real redis-server; a queue of 8 (when_full: block) keeps events arriving while Redis is away. After about 60 calls the test stops Redis for 2 s and starts a new, empty
one on the same port. Asserts:
  - assayd stops by itself with exit code 0;
  - the cheap judge goes on: every event has a context_overlap verdict;
  - LLM judges pause while Redis is away (skipped_budget > 0) and resume after it (scores
    both before and after the restart);
  - the ledger is intact: Redis' settled spend after the run equals the sum of cost_eur in
    the JSON Lines, including what was settled before the restart (re-asserted by the daemon
    on its first connection to the new Redis, which it logs);
  - no reservation is left held.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402


def fake_requests(port):
    status, body = tp.http_get(f"http://127.0.0.1:{port}/_fake/stats")
    return json.loads(body)["requests"] if status == 200 else -1


def redis_out(port, *words):
    return subprocess.run(["redis-cli", "-p", str(port), *words], capture_output=True, text=True,
                          timeout=10).stdout


def run(args, workdir, checks):
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        procs.append((broker, "broker"))
        events = tp.load_dev_events(args.data)
        half = len(events) // 2

        def produce(batch):
            tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, batch)

        produce(events[:half])
        redis, rport = tp.start_redis(workdir)
        procs.append((redis, "redis"))
        fake, fport = tp.start_fake_provider(args.assayd, "--delay-ms", "40")
        procs.append((fake, "fake provider"))
        jsonl = os.path.join(workdir, "j.jsonl")
        cfg = os.path.join(workdir, "c.yaml")
        with open(cfg, "w") as f:
            f.write(f"""kafka: {{brokers: {json.dumps(bootstrap)}, topic: {tp.EVENTS_TOPIC}, group_id: rr}}
sampling: {{rate: 1.0}}
limits: {{queue_capacity: 8}}  # when_full: block: events reach the LLM judge as it keeps up
budget: {{daily_limit_eur: 10, store: "redis://127.0.0.1:{rport}/0"}}
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
    timeout_ms: 2000
admin: {{listen: "127.0.0.1:{tp.free_loopback_port()}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")
        log_path = os.path.join(workdir, "assayd.log")
        with open(log_path, "wb") as log:
            daemon = subprocess.Popen(
                [args.assayd, "--config", cfg, "--exit-when-idle", "4"],
                stdout=log, stderr=log, env=dict(os.environ, ASSAY_TEST_LLM_KEY="sk-test"),
                start_new_session=True)
        procs.append((daemon, "assayd"))
        deadline = time.monotonic() + 60
        while fake_requests(fport) < 60 and time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(0.05)
        before = fake_requests(fport)
        tp.stop_process(redis, "redis")
        tp.log(f"redis stopped after {before} provider calls")
        time.sleep(2.0)
        redis, _ = tp.start_redis(workdir, rport)
        procs.append((redis, "redis"))
        tp.log("redis started again, empty")

        def answers_again():
            with open(log_path, errors="replace") as f:
                return "answers again" in f.read()

        # The ledger reconnects within about a second (its gauges' snapshot, or a call); events
        # that come before are skipped_budget at once (fail closed).
        deadline = time.monotonic() + 20
        while not answers_again() and time.monotonic() < deadline:
            time.sleep(0.05)
        checks.true("the daemon says the budget store answers again", answers_again(), "")
        produce(events[half:])
        rc = daemon.wait(timeout=240)
        checks.eq("exit code", 0, rc)

        overlap, llm, cost = 0, {}, 0.0
        with open(jsonl) as f:
            for line in f:
                for v in json.loads(line)["verdicts"]:
                    if v["judge"] == "overlap":
                        overlap += 1
                    else:
                        o = v.get("error", "ok")
                        llm[o] = llm.get(o, 0) + 1
                        cost += v.get("cost_eur", 0)
        tp.log(f"LLM outcomes {llm}")
        checks.eq("the cheap judge judged every event", len(events), overlap)
        checks.true("LLM judges paused while Redis was away (skipped_budget)",
                    llm.get("skipped_budget", 0) > 0, llm)
        checks.true("LLM judges scored before and after the restart",
                    llm.get("ok", 0) > before and fake_requests(fport) > before + 10,
                    f"{llm.get('ok', 0)} scores, {fake_requests(fport)} calls, {before} before")
        spent_keys = redis_out(rport, "--scan", "--pattern", "assay:*:budget:*:global:spent").split()
        spent = sum(int(redis_out(rport, "GET", k).strip() or 0) for k in spent_keys) / 1e9
        checks.true("Redis spend after the run == sum of cost_eur in the JSON Lines",
                    abs(spent - cost) < 1e-9, f"{spent:.9f} vs {cost:.9f}")
        held = sum(int(redis_out(rport, "HLEN", k).strip() or 0)
                   for k in redis_out(rport, "--scan", "--pattern", "assay:*:budget:*:res").split())
        checks.eq("reservations left held", 0, held)
        with open(log_path, errors="replace") as f:
            text = f.read()
        checks.true("the log says the lost spend was added back", "added back" in text,
                    tp.tail(log_path))
        return (f"Redis restarted empty after {before} calls: LLM {llm}, spend EUR {spent:.6f} "
                f"= JSON Lines")
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_redis_restart", run))
