#!/usr/bin/python3
"""A clean restart writes nothing twice; shutdown with the broker gone (issue 10, "Signals").

A broker process (tests/tools/mock_broker.cpp) with the dev events; assayd at rate 1.0 with a
cheap judge and an LLM judge on the fake provider, whose first four calls hang for 60 s while
every later call answers at once. So four events stay pending while hundreds after them on the
same partitions are judged and written: the committable position of those partitions stops at
the first pending event.

  1. SIGTERM. The final commit carries, as Kafka commit metadata, which offsets above the
     position were already finished. Exit code 0.
  2. Restart in the same group with a provider that answers at once. The events after each
     committed position are redelivered; those finished before are skipped and counted in
     assay_events_replay_skipped_total, the four pending ones are judged. Across both JSON
     Lines files every event is written exactly once (before this issue: the finished events
     after a pending one were judged and written again, 139 of 1,150 in the operator's trial).
  3. Restart again with nothing new: right after the assignment the lag gauges read 0 on every
     partition (lag from the committed offset, not from the oldest retained message).
  4. In that run, 20 new events are judged, the broker goes down ("down" on its stdin), and
     SIGTERM: the shutdown logs what it waits for, gives up on the final commit, and exits 3.
  5. Run again (broker up), broker down, SIGTERM, then a second SIGTERM while it waits: exit
     143 (128 + SIGTERM) at once.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import collections
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

HUNG_CALLS = 4


def write_config(workdir, name, bootstrap, group, provider_port, commit_interval_ms=5000):
    admin = tp.free_loopback_port()
    cfg = os.path.join(workdir, f"{name}.yaml")
    jsonl = os.path.join(workdir, f"{name}.jsonl")
    with open(cfg, "w") as f:
        f.write(f"""kafka:
  brokers: {json.dumps(bootstrap)}
  topic: {tp.EVENTS_TOPIC}
  group_id: {group}
  properties: {{session.timeout.ms: "6000", heartbeat.interval.ms: "500", auto.commit.interval.ms: "{commit_interval_ms}"}}
sampling: {{rate: 1.0}}
log: {{level: debug}}
limits: {{drain_timeout_ms: 1000}}
budget: {{daily_limit_eur: 5.0}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
  - {{name: f, kind: llm, criterion: faithfulness, endpoint: "http://127.0.0.1:{provider_port}/v1", model: gpt-4o-mini, max_in_flight: 8}}
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")
    return cfg, jsonl, f"http://127.0.0.1:{admin}"


def start(assayd, workdir, name, cfg, url):
    log_path = os.path.join(workdir, f"{name}.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([assayd, "--config", cfg], stdout=log, stderr=log,
                                start_new_session=True)
    tp.wait_for(f"{name}: /readyz 200", lambda: tp.http_get(url + "/readyz")[0] == 200, 60)
    return proc, log_path


def metrics(url):
    status, text = tp.http_get(url + "/metrics")
    if status != 200:
        raise tp.TestFailure(f"{url}/metrics answered {status}")
    return tp.parse_metrics(text)


def ids_of(path):
    ids = collections.Counter()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                ids[json.loads(line)["id"]] += 1
    return ids


def lag_series(samples):
    return {labels.get("partition"): value for name, labels, value in samples
            if name == "assay_consumer_lag_messages"}


def run(args, workdir, checks):
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        procs.append((broker, "broker"))
        hung, hung_port = tp.start_fake_provider(args.assayd)
        procs.append((hung, "hanging provider"))
        script = json.dumps([{"delay_ms": 60000}] * HUNG_CALLS).encode()
        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{hung_port}/_fake/script", data=script), timeout=5).read()
        fast, fast_port = tp.start_fake_provider(args.assayd)
        procs.append((fast, "provider"))
        events = tp.load_dev_events(args.data)
        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events)
        group = f"restart-{os.getpid()}"

        # 1. Judge most events while four LLM calls hang, then SIGTERM.
        cfg1, jsonl1, url1 = write_config(workdir, "run1", bootstrap, group, hung_port)
        d1, _ = start(args.assayd, workdir, "run1", cfg1, url1)
        procs.append((d1, "assayd run 1"))
        tp.wait_for("run 1: all but the hung events judged",
                    lambda: tp.judged_count(url1) >= len(events) - HUNG_CALLS, 120, 0.3)
        # The gauge is refreshed once a second: wait for the value after the burst.
        try:
            tp.wait_for("run 1: the pending gauge at the hung calls", lambda: tp.metric(
                metrics(url1), "assay_judge_pending_events") == HUNG_CALLS, 10, 0.3)
        except tp.TestFailure:
            pass
        pending = tp.metric(metrics(url1), "assay_judge_pending_events")
        checks.eq("run 1: events waiting for a hung LLM call", HUNG_CALLS, pending)
        d1.send_signal(signal.SIGTERM)
        checks.eq("run 1: exit code after SIGTERM", 0, d1.wait(timeout=60))
        first = ids_of(jsonl1)
        offsets = tp.committed_vs_end(bootstrap, group, tp.EVENTS_TOPIC)
        behind = sum(end - committed for committed, end in offsets.values())
        tp.log(f"run 1: {len(first)} events written; committed offsets {offsets}")
        checks.true("run 1: the hung events hold back some committed positions",
                    behind > HUNG_CALLS, f"{behind} messages after the committed offsets")

        # 2. Restart: the redelivered events finished before are skipped, the rest judged.
        cfg2, jsonl2, url2 = write_config(workdir, "run2", bootstrap, group, fast_port)
        d2, log2 = start(args.assayd, workdir, "run2", cfg2, url2)
        procs.append((d2, "assayd run 2"))
        def dealt_with(s):  # every redelivered message consumed, and skipped or judged
            return ((tp.metric(s, "assay_events_consumed_total") or 0) >= behind and
                    (tp.metric(s, "assay_events_replay_skipped_total") or 0) +
                    (tp.metric(s, "assay_events_judged_total") or 0) >= behind)
        samples, _ = tp.scrape_until(url2, dealt_with, 60)
        consumed2 = tp.metric(samples, "assay_events_consumed_total")
        skipped2 = tp.metric(samples, "assay_events_replay_skipped_total")
        judged2 = tp.metric(samples, "assay_events_judged_total")
        d2.send_signal(signal.SIGTERM)
        checks.eq("run 2: exit code", 0, d2.wait(timeout=60))
        second = ids_of(jsonl2)
        both = first + second
        tp.log(f"run 2: consumed {consumed2}, skipped {skipped2}, judged {judged2}")
        checks.eq("run 2: consumed = the messages after the committed offsets", behind, consumed2)
        checks.eq("run 2: skipped = consumed - the hung events", behind - HUNG_CALLS, skipped2)
        checks.eq("run 2: judged = the hung events", HUNG_CALLS, judged2)
        checks.eq("events written in both runs (each exactly once)", len(events), len(both))
        checks.eq("events written twice across the restart", 0,
                  sum(1 for c in both.values() if c > 1))
        with open(log2) as f:
            checks.true("run 2: the log says finished events are skipped",
                        "they are skipped, not judged again" in f.read())
        final = tp.committed_vs_end(bootstrap, group, tp.EVENTS_TOPIC)
        checks.eq("run 2: committed offsets at the end of every partition", {},
                  {p: o for p, o in final.items() if o[0] != o[1]})

        # 3. Nothing new: the lag reads 0 from the first refresh after the assignment.
        # No periodic commit in this run (10 min apart): the final commit is the one that
        # carries the 20 new events, and it meets the broker down.
        cfg3, jsonl3, url3 = write_config(workdir, "run3", bootstrap, group, fast_port,
                                          commit_interval_ms=600000)
        d3, log3 = start(args.assayd, workdir, "run3", cfg3, url3)
        procs.append((d3, "assayd run 3"))
        tp.wait_for("run 3: lag gauges of the 6 partitions",
                    lambda: len(lag_series(metrics(url3))) == tp.EVENTS_PARTITIONS, 20, 0.3)
        lag = lag_series(metrics(url3))
        checks.eq("run 3: lag right after the assignment (all committed)",
                  {str(p): 0.0 for p in range(tp.EVENTS_PARTITIONS)}, lag)
        assigned = tp.metric(metrics(url3), "assay_consumer_assigned_partitions",
                             topic=tp.EVENTS_TOPIC)
        checks.eq("run 3: assay_consumer_assigned_partitions", tp.EVENTS_PARTITIONS, assigned)

        # 4. New events, then the broker goes down, then SIGTERM: exit 3, waits logged.
        extra = [(f"{eid}-late", raw.replace(eid.encode(), f"{eid}-late".encode(), 1))
                 for eid, raw in events[:20]]
        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, extra)
        tp.wait_for("run 3: the 20 new events judged", lambda: tp.judged_count(url3) >= 20, 60)
        broker.stdin.write(b"down\n")
        broker.stdin.flush()
        tp.wait_for("run 3: /readyz 503 with the broker down",
                    lambda: tp.http_get(url3 + "/readyz")[0] == 503, 60, 0.3)
        t0 = time.monotonic()
        d3.send_signal(signal.SIGTERM)
        rc3 = d3.wait(timeout=90)
        took = time.monotonic() - t0
        tp.log(f"run 3: stopped {took:.1f} s after SIGTERM with the broker down, exit code {rc3}")
        checks.eq("run 3: exit code when the final commit fails", 3, rc3)
        with open(log3) as f:
            text = f.read()
        checks.true("run 3: the shutdown logs what it waits for",
                    "shutdown: still waiting for the final offset commit" in text)
        checks.true("run 3: the log names the failed commit", "final offset commit failed" in text)
        checks.true("run 3: stopped within 45 s", took < 45, f"{took:.1f} s")

        # 5. A second SIGTERM while the shutdown waits ends assayd at once.
        broker.stdin.write(b"up\n")
        broker.stdin.flush()
        cfg4, _, url4 = write_config(workdir, "run4", bootstrap, group, fast_port)
        d4, log4 = start(args.assayd, workdir, "run4", cfg4, url4)
        procs.append((d4, "assayd run 4"))
        broker.stdin.write(b"down\n")
        broker.stdin.flush()
        tp.wait_for("run 4: /readyz 503", lambda: tp.http_get(url4 + "/readyz")[0] == 503, 60, 0.3)
        d4.send_signal(signal.SIGTERM)

        def stop_logged():
            with open(log4, errors="replace") as f:
                return "stop requested" in f.read()
        # The second signal must come after the first was handled: two pending SIGTERMs are one.
        tp.wait_for("run 4: the first SIGTERM handled", stop_logged, 30)
        t0 = time.monotonic()
        d4.send_signal(signal.SIGTERM)
        rc4 = d4.wait(timeout=30)
        took4 = time.monotonic() - t0
        tp.log(f"run 4: stopped {took4:.2f} s after the second SIGTERM, exit code {rc4}")
        checks.eq("run 4: exit code after a second SIGTERM", 128 + signal.SIGTERM, rc4)
        # At once (tens of ms) instead of the final commit's wait (15 s with the broker down):
        # 10 s tells them apart on a loaded machine.
        checks.true("run 4: the second SIGTERM ends it before the commit's wait", took4 < 10,
                    f"{took4:.2f} s")
        with open(log4) as f:
            checks.true("run 4: the log says why", "second stop signal" in f.read())
        return (f"{len(first)} + {len(second)} events written once each across a restart "
                f"({skipped2:.0f} redelivered and skipped); broker-down stop: exit 3 in "
                f"{took:.0f} s")
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_clean_restart", run))
