#!/usr/bin/python3
"""The results topic goes away while events flow (issue 9, "Neighbours failing").

A cluster of two brokers (tests/tools/mock_broker.cpp): broker 1 leads the events topic and
coordinates the consumer group, broker 2 leads the results topic. assayd consumes at rate 1.0
with one cheap judge, a JSON Lines file and the results topic, with message.timeout.ms at 4 s
(librdkafka's default is 300 s) so that the outage outlasts it, and reconnect.backoff.max.ms at
500 ms. The dev events are produced in
three parts:
  A. both brokers up: every judgment reaches the file and the topic;
  B. broker 2 down: consumption and judging go on; every judgment reaches the file, and each
     one's delivery to the topic fails once its 4 s run out: counted in
     assay_sink_writes_total{sink="kafka",result="error"}, never a crash, memory bounded;
  C. broker 2 up again: the producer recovers, every judgment of C reaches the topic.
Then assayd stops on SIGTERM with exit code 0, and the group's committed offsets
reach the end of every partition: B's events are not replayed (their loss is counted).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import collections
import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

PROBE_TOPIC = "integ.probe"  # led by broker 2, as the results topic: is it up?


def delivered(bootstrap):
    """Whether one message to PROBE_TOPIC is acknowledged within 2 s."""
    acks = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 2000})
    p.produce(PROBE_TOPIC, value=b"probe", on_delivery=lambda err, msg: acks.append(err is None))
    p.flush(5)
    return acks == [True]


def run(args, workdir, checks):
    procs = []
    try:
        group = f"results-down-{os.getpid()}"
        broker, bootstrap = tp.start_broker(
            args.mock_broker, workdir,
            [f"{tp.EVENTS_TOPIC}:{tp.EVENTS_PARTITIONS}@1",
             f"{tp.RESULTS_TOPIC}:{tp.RESULTS_PARTITIONS}@2", f"{PROBE_TOPIC}:1@2"],
            ["--brokers", "2", "--coordinator", f"{group}@1"])
        procs.append((broker, "broker"))
        events = tp.load_dev_events(args.data)
        third = len(events) // 3
        parts = {"A": events[:third], "B": events[third:2 * third], "C": events[2 * third:]}

        daemon, url, jsonl, log_path = tp.start_overlap_daemon(
            args.assayd, workdir, bootstrap, group,
            {"results_topic": tp.RESULTS_TOPIC,
             "properties": {"message.timeout.ms": "4000", "reconnect.backoff.max.ms": "500"}})
        procs.append((daemon, "assayd"))

        def counts():
            status, text = tp.http_get(url + "/metrics")
            if status != 200:
                return {}
            s = tp.parse_metrics(text)
            return {"judged": tp.metric(s, "assay_events_judged_total") or 0,
                    "ok": tp.metric(s, "assay_sink_writes_total", sink="kafka", result="ok") or 0,
                    "error": tp.metric(s, "assay_sink_writes_total", sink="kafka",
                                       result="error") or 0}

        def produce(name):
            tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, parts[name])

        a, b, c = (len(parts[k]) for k in "ABC")
        produce("A")
        tp.wait_for("part A judged and delivered", lambda: counts().get("ok") == a, 60)
        broker.stdin.write(b"down 2\n")
        broker.stdin.flush()
        t0 = time.monotonic()
        produce("B")
        tp.wait_for("part B judged while the results topic is down",
                    lambda: counts().get("judged") == a + b, 60)
        judged_b_s = time.monotonic() - t0
        tp.wait_for("part B's deliveries failed and counted",
                    lambda: counts().get("error") == b, 60)
        during = counts()
        checks.eq("judgments delivered during the outage", a, during["ok"])
        checks.eq("failed deliveries counted", b, during["error"])
        checks.true("assayd runs through the outage", daemon.poll() is None, tp.tail(log_path))
        with open(f"/proc/{daemon.pid}/status") as f:
            hwm_mb = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 1024
        checks.true("peak RSS under 200 MB", hwm_mb < 200, f"{hwm_mb:.0f} MB")
        outage_s = time.monotonic() - t0
        broker.stdin.write(b"up 2\n")
        broker.stdin.flush()
        tp.log(f"results broker down {outage_s:.1f} s: {b} events judged in {judged_b_s:.1f} s, "
               f"{during['error']:.0f} deliveries failed")
        # Broker 2 serves again once a producer of the test's own gets a delivery from it. assayd's
        # producer tries again within reconnect.backoff.max.ms (500 ms here; librdkafka's default
        # is 10 s), and each judgment of part C may wait message.timeout.ms (4 s) for it.
        tp.wait_for("broker 2 serving again", lambda: delivered(bootstrap), 30, 0)
        produce("C")
        tp.wait_for("part C delivered after recovery", lambda: counts().get("ok") == a + c, 90)
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
        checks.eq("exit code after SIGTERM", 0, rc)
        ids = collections.Counter()
        with open(jsonl) as f:
            for line in f:
                ids[json.loads(line)["id"]] += 1
        checks.eq("events in the JSON Lines file (every one, once)", (len(events), 0),
                  (len(ids), sum(1 for n in ids.values() if n > 1)))
        results = collections.Counter(k.decode() for k, _, _ in
                                      tp.read_topic(bootstrap, tp.RESULTS_TOPIC))
        want = {eid for eid, _ in parts["A"] + parts["C"]}
        checks.eq("judgments in the results topic: A and C, each once", (len(want), 0, 0),
                  (len(results), len(want - set(results)),
                   sum(1 for n in results.values() if n > 1)))
        offsets = tp.committed_vs_end(bootstrap, group, tp.EVENTS_TOPIC)
        checks.eq("committed offsets at the end of every partition", {},
                  {p: o for p, o in offsets.items() if o[0] != o[1]})
        with open(log_path, errors="replace") as f:
            logged = sum(1 for line in f if "results topic: delivery failed" in line)
        checks.true("failed deliveries logged, at most 10 lines", 1 <= logged <= 10, logged)
        return (f"results topic down {outage_s:.0f} s: {b} judgments counted as failed "
                f"deliveries, {a + c} delivered, peak RSS {hwm_mb:.0f} MB")
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_results_down", run, tp.common_args()))
