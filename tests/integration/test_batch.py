#!/usr/bin/python3
"""Batch judging across kill -9 (issue 14): 250 samples at 100 a batch, the daemon killed after
the second batch is submitted; after the restart every event has its verdict, 3 batches were
submitted in all, and nothing was paid twice.

  1. a real redis-server (the budget ledger, the verdict store and the batch records), a broker
     process (tests/tools/mock_broker.cpp) and the fake OpenAI-compatible provider, whose batches
     end 6 s after they are created, which answers the creation of the second batch 4 s late
     (the batch exists meanwhile) and which logs every request it bills (--call-log);
  2. 250 dev events with contexts, keyed, produced with kcat;
  3. run A: assayd with a faithfulness LLM judge, `batch: true`, 100 requests a batch (flushed
     after 3 s), polled every 0.5 s, Redis store; killed with SIGKILL as soon as the provider
     has created its second batch, so that run A never hears that batch's id (a crash between
     the provider's acceptance and the record of its id: CI once lost 100 verdicts there);
  4. run B: assayd again, same group: it takes the two batches over once their lease lapses
     (the second found among the provider's batches by its input file), settles their results
     into the verdict store, and judges the redelivered events from it; the 50 events of the
     third batch, never submitted, are batched again.

Asserts: every one of the 250 events has an LLM verdict (a score); the provider created
batches of 100, 100 and then 50 requests (in one batch, or two when they trickle in) and
billed 250 requests, each once (its call log); the
budget's spent euros equal the provider's bill at the batch price (half the list price) to
the cent; no batch record is left in Redis.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

TOPIC, PARTITIONS = "batch.events", 4
GROUP = "assay-batch-test"
JUDGE = "faithfulness_batch"
PRICE_IN, PRICE_OUT, USD_TO_EUR = 0.15, 0.60, 0.92  # gpt-4o-mini, USD per million tokens


def write_config(path, bootstrap, redis_port, fake_port, admin, jsonl):
    with open(path, "w") as f:
        f.write(f"""kafka:
  brokers: "{bootstrap}"
  topic: {TOPIC}
  group_id: {GROUP}
  properties:
    session.timeout.ms: 6000
sampling: {{rate: 1.0}}
budget:
  daily_limit_eur: 5
  usd_to_eur: {USD_TO_EUR}
  store: redis://127.0.0.1:{redis_port}/0
judges:
  - name: {JUDGE}
    kind: llm
    criterion: faithfulness
    endpoint: "http://127.0.0.1:{fake_port}/v1"
    model: gpt-4o-mini
    max_tokens: 200
    timeout_ms: 5000
    batch: true
    batch_max_requests: 100
    batch_max_wait_ms: 3000
    batch_poll_ms: 500
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")


def fake_stats(port):
    return json.loads(tp.http_get(f"http://127.0.0.1:{port}/_fake/stats")[1])


def run(args, workdir, checks):
    dev = [json.loads(l) for l in open(args.data) if l.strip()]
    with_contexts = [e for e in dev if any(c.get("text") for c in e.get("contexts") or [])]
    events = [dict(e, id=f"{e['id']}~batch") for e in with_contexts[:250]]
    if len(events) != 250:
        raise tp.TestFailure(f"the dev data has {len(events)} events with contexts, 250 needed")
    redis, redis_port = tp.start_redis(workdir)
    call_log = os.path.join(workdir, "calls.log")
    fake, fake_port = tp.start_fake_provider(args.assayd, "--batch-delay-ms", "6000",
                                             "--batch-create-delay-ms", "4000",
                                             "--batch-create-delay-from", "2",
                                             "--call-log", call_log)
    broker, bootstrap = tp.start_broker(args.mock_broker, workdir, [f"{TOPIC}:{PARTITIONS}"])
    daemon = None
    try:
        tp.produce_keyed(bootstrap, TOPIC, [(e["id"], json.dumps(e).encode()) for e in events])
        admin = tp.free_loopback_port()
        url = f"http://127.0.0.1:{admin}"
        jsonl = os.path.join(workdir, "j.jsonl")
        cfg = os.path.join(workdir, "c.yaml")
        write_config(cfg, bootstrap, redis_port, fake_port, admin, jsonl)
        log_a = open(os.path.join(workdir, "assayd-a.log"), "wb")
        daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log_a, stderr=log_a,
                                  start_new_session=True)
        tp.wait_for("the provider's second batch", lambda: fake_stats(fake_port)["batches"] >= 2, 90,
                    step=0.05)
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=10)
        daemon = None
        at_kill = fake_stats(fake_port)
        checks.eq("batches submitted when run A was killed", 2, at_kill["batches"])
        log_b = open(os.path.join(workdir, "assayd-b.log"), "wb")
        t0 = time.monotonic()
        daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log_b, stderr=log_b,
                                  start_new_session=True)

        def verdicts():
            out = {}
            if os.path.exists(jsonl):
                for line in open(jsonl):
                    j = json.loads(line)
                    for v in j["verdicts"]:
                        if v["judge"] == JUDGE and v.get("score") is not None:
                            out[j["id"]] = v
            return out

        def records():
            keys = []
            for pattern in ("*:batches:*", "*:batchlease:*"):
                r = subprocess.run(["redis-cli", "-p", str(redis_port), "--scan", "--pattern",
                                    pattern], capture_output=True, text=True)
                keys += [k for k in r.stdout.split() if k]
            return keys
        try:
            tp.wait_for("a scored LLM verdict for each of the 250 events",
                        lambda: len(verdicts()) == 250, 180, step=0.5)
        except tp.TestFailure:
            log(f"{len(verdicts())} events have a verdict; batch records left: {records()}")
            for name in ("assayd-a.log", "assayd-b.log"):
                with open(os.path.join(workdir, name), errors="replace") as f:
                    lines = [l for l in f if "batch" in l]
                log(f"{name}, its lines about batches:\n" + "".join(lines[-40:]))
            raise
        tp.wait_for("no batch record left in Redis", lambda: records() == [], 30)
        log(f"run B judged everything {time.monotonic() - t0:.1f} s after the restart")
        with open(os.path.join(workdir, "assayd-b.log"), errors="replace") as f:
            found = [l.split("batch ")[1].split()[0] for l in f if "found at the provider" in l]
        checks.true("run B found the second batch at the provider by its input file (run A "
                    "never heard its id)", "batch_2" in found, f"found: {found}")
        billed = [l.split() for l in open(call_log) if l.strip()]
        bill_eur = sum(int(b[3]) * PRICE_IN + int(b[4]) * PRICE_OUT for b in billed) / 1e6 \
            * 0.5 * USD_TO_EUR

        def spent_of(samples):
            return tp.metric(samples, "assay_budget_spent_euros", scope="global")
        # The budget gauges are refreshed once a second: wait for the value the bill implies.
        samples, _ = tp.scrape_until(
            url, lambda s: round(spent_of(s) or 0, 2) == round(bill_eur, 2), 30)
        spent = spent_of(samples)
        tp.stop_process(daemon, "assayd")
        daemon = None

        s = fake_stats(fake_port)
        # The two batches run A submitted, then the 50 events never submitted, batched again by
        # run B: one batch of 50, or two when the redelivery trickles in over more than
        # batch_max_wait_ms (a loaded machine once split them 17 + 33).
        checks.eq("run A's two batches: 100 and 100", [100, 100], s["batch_sizes"][:2])
        checks.true("run B batched the other 50 once, in one or two batches",
                    sum(s["batch_sizes"][2:]) == 50 and s["batches"] in (3, 4), s["batch_sizes"])
        checks.eq("requests the provider answered in batches (each once)", 250, s["batched"])
        checks.eq("synchronous calls", 0, s["requests"])
        checks.eq("requests in the provider's call log", 250, len(billed))
        log(f"the provider's bill at the batch price: EUR {bill_eur:.6f}; the ledger: {spent}")
        checks.eq("the ledger's spent euros = the provider's bill at half price, to the cent",
                  round(bill_eur, 2), round(spent or 0, 2))
        stored = sum(1 for v in verdicts().values() if v.get("stored"))
        log(f"{stored} verdicts of redelivered events came from the verdict store")
        checks.true("redelivered events of the 200 settled by the takeover came from the store",
                    stored >= 100, f"{stored}")
        return "250 verdicts across kill -9, 3 batches, nothing paid twice"
    finally:
        tp.stop_process(daemon, "assayd")
        tp.stop_process(broker, "mock broker")
        tp.stop_process(fake, "fake provider")
        tp.stop_process(redis, "redis-server")


def log(msg):
    print(f"[test_batch] {msg}", flush=True)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_batch", run))
