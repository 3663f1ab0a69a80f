#!/usr/bin/python3
"""assay backfill over past traffic (issue 14): the estimate first, a refusal above
--max-cost-eur, then a run that judges the range and never commits to the live group.

  1. a broker process (tests/tools/mock_broker.cpp), 8 partitions; 5,000 keyed events (the dev
     data under new ids) produced with kcat, so their timestamps are now;
  2. `assay backfill --from 1h --rate 0.1 --judge faithfulness_llm --max-cost-eur 0.10` with
     a gpt-4o-mini judge (max_tokens 200) and --input-tokens 800: the estimate prints 5,000
     events, about 500 calls, EUR 0.11 at synchronous prices (500 x (800 x 0.15 + 200 x 0.60)
     / 10^6 USD x 0.92 = EUR 0.1104) and EUR 0.06 at batch prices (half: 0.0552), and refuses
     with exit 2, judging nothing;
  3. the same with --yes against the fake provider, --output FILE.

Three invalid messages are in the range, and the configuration has a dead-letter topic.
Asserts: the estimate's figures; exit 2 and no output file on the refusal; on the run, one
judgment per sampled event (python3-xxhash: XXH3_64(id) < 0.1 x 2^64), each with
"backfill": true and an LLM verdict; the fake provider answered one call per sampled event
with contexts (the others are no_context, no call); the dead-letter topic stays empty (the live
daemon dead-lettered the invalid messages when it consumed them); the
group of the configuration has no committed offset afterwards (the backfill joined no group).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

TOPIC, PARTITIONS, DLQ = "backfill.events", 8, "backfill.dlq"
INVALID = 3  # invalid messages in the range: the live daemon dead-lettered them, not the backfill
GROUP = "assay-live-group"
N = 5000


def run(args, workdir, checks):
    assay = os.path.join(os.path.dirname(args.assayd), "assay")
    dev = [json.loads(l) for l in open(args.data) if l.strip()]
    events = []
    k = 0
    while len(events) < N:
        for e in dev:
            if len(events) == N:
                break
            events.append(dict(e, id=f"{e['id']}~bf{k}"))
        k += 1
    sampled = [e["id"] for e in events if tp.sampled(e["id"], 0.1)]
    broker, bootstrap = tp.start_broker(args.mock_broker, workdir,
                                        [f"{TOPIC}:{PARTITIONS}", f"{DLQ}:1"])
    fake = None
    try:
        tp.produce_keyed(bootstrap, TOPIC, [(e["id"], json.dumps(e).encode()) for e in events] +
                         [(f"not-json-{i}", b"{not json") for i in range(INVALID)])
        fake, port = tp.start_fake_provider(args.assayd)
        cfg = os.path.join(workdir, "c.yaml")
        with open(cfg, "w") as f:
            f.write(f"""kafka: {{brokers: "{bootstrap}", topic: {TOPIC}, group_id: {GROUP}, dead_letter_topic: {DLQ}}}
sampling: {{rate: 0.05}}
budget: {{daily_limit_eur: 5, store: memory}}
judges:
  - {{name: claim_support, kind: lexical, metric: claim_support}}
  - name: faithfulness_llm
    kind: llm
    criterion: faithfulness
    endpoint: "http://127.0.0.1:{port}/v1"
    model: gpt-4o-mini
    max_tokens: 200
    max_in_flight: 8
sinks: {{jsonl: {{path: {json.dumps(os.path.join(workdir, "live.jsonl"))}}}}}
""")
        out_file = os.path.join(workdir, "backfill.jsonl")
        common = [assay, "backfill", "--config", cfg, "--from", "1h", "--rate", "0.1",
                  "--judge", "faithfulness_llm", "--input-tokens", "800", "--output", out_file]
        refused = subprocess.run(common + ["--max-cost-eur", "0.10"], capture_output=True,
                                 text=True, timeout=120)
        log(refused.stdout + refused.stderr)
        checks.eq("--max-cost-eur 0.10 below the estimate: exit code", 2, refused.returncode)
        text = refused.stdout
        checks.true("the estimate prints the events in range", "events in range: 5,003" in text,
                    text[:400])
        checks.true("about 500 calls for faithfulness_llm", "about 500" in text, text[:600])
        checks.true("EUR 0.11 at synchronous prices, EUR 0.06 at batch prices",
                    "EUR 0.11 at synchronous prices, EUR 0.06 at batch prices" in text, text)
        checks.true("refused on standard error, nothing judged",
                    "refused: the estimate, EUR 0.11" in refused.stderr and
                    (not os.path.exists(out_file) or os.path.getsize(out_file) == 0), text)

        ran = subprocess.run(common + ["--yes"], capture_output=True, text=True, timeout=300)
        log(ran.stdout[-600:] + ran.stderr[-2000:])
        checks.eq("--yes: exit code", 0, ran.returncode)
        judgments = [json.loads(l) for l in open(out_file)] if os.path.exists(out_file) else []
        checks.eq("one judgment per sampled event (XXH3 of the id < 0.1 x 2^64)", sorted(sampled),
                  sorted(j["id"] for j in judgments))
        checks.eq("every judgment says backfill: true", len(judgments),
                  sum(1 for j in judgments if j.get("backfill") is True))
        llm = [v for j in judgments for v in j["verdicts"] if v["judge"] == "faithfulness_llm"]
        checks.eq("an LLM verdict in each", len(judgments), len(llm))
        calls = tp.http_get(f"http://127.0.0.1:{port}/_fake/stats")[1]
        with_contexts = {e["id"] for e in events
                         if any(c.get("text") for c in e.get("contexts") or [])}
        checks.eq("calls the provider answered (sampled events with contexts; the others are "
                  "no_context without a call)", len(set(sampled) & with_contexts),
                  json.loads(calls)["requests"])
        checks.true("a progress summary", "backfill: 5,003 of 5,003 events read" in ran.stdout,
                    ran.stdout[-300:])
        # Invalid messages are not dead-lettered again (issue 29: the backfill re-sent them).
        checks.eq("messages the backfill put in the dead-letter topic", 0,
                  len(tp.read_topic(bootstrap, DLQ)))
        committed = tp.committed_vs_end(bootstrap, GROUP, TOPIC)
        checks.eq("the live group's committed offsets (none: the backfill commits nothing)",
                  {p: -1001 for p in committed}, {p: c for p, (c, e) in committed.items()})
        return f"{len(judgments)} events judged from the last hour, nothing committed"
    finally:
        tp.stop_process(fake, "fake provider")
        tp.stop_process(broker, "mock broker")


def log(msg):
    print(f"[test_backfill] {msg}", flush=True)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_backfill", run))
