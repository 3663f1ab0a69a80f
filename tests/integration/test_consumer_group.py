#!/usr/bin/python3
"""Two assayd instances share one consumer group (cooperative-sticky rebalancing).

  1. a broker process (tests/tools/mock_broker.cpp) with a 6-partition events topic;
  2. instance A joins the group alone; the first half of the dev events is produced with kcat
     (keyed by id) and A judges its sampled share;
  3. instance B joins: the group rebalances while A is running, so A must store and commit its
     finished offsets before giving partitions up (commit on revoke);
  4. the second half is produced; both judge; once every sampled event is written and the
     periodic commit has reached the end of every partition, both get SIGTERM together (their
     final commits then have nothing new to send: one sent while the other's leaving rebalances
     the group would be refused by the coordinator, exit code 3; a periodic commit whose result
     was not served yet is served first, sources/kafka.cpp, KafkaConsumer::close).

Asserts, against expectations computed here with python3-xxhash (rate 0.5):
  - the union of both JSON Lines files is exactly the expected sampled id set;
  - no event was judged twice (A was idle at the rebalance, so B resumes exactly at A's
    committed offsets: a duplicate would mean an offset was not committed on revoke);
  - B judged part of the second half (the work is shared);
  - the group's committed offsets equal the end of every partition; both exit codes are 0.
Invoked by ctest with --assayd, --mock-broker and --data (see tests/CMakeLists.txt).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402  (shared helpers: broker, kcat input, metrics)

RATE = 0.5
STRATEGY = os.environ.get("ASSAY_TEST_STRATEGY", "cooperative-sticky")


def write_config(path, bootstrap, group, port, jsonl):
    q = json.dumps
    with open(path, "w") as f:
        f.write(f"""kafka:
  brokers: {q(bootstrap)}
  topic: {q(tp.EVENTS_TOPIC)}
  group_id: {q(group)}
  properties:
    partition.assignment.strategy: "{STRATEGY}"
    # librdkafka 2.0's mock coordinator holds a rebalance open for the whole rebalance timeout
    # (max.poll.interval.ms, 5 min by default) before it completes it: shorten it.
    max.poll.interval.ms: 8000
    session.timeout.ms: 6000
    heartbeat.interval.ms: 500
sampling: {{rate: {RATE}}}
judges:
  - {{name: rouge_l, kind: lexical, metric: rouge_l}}
  - {{name: context_overlap, kind: lexical, metric: context_overlap}}
admin: {{listen: "127.0.0.1:{port}"}}
sinks: {{jsonl: {{path: {q(jsonl)}}}}}
""")


def produce(bootstrap, events):
    payload = b"".join(eid.encode() + tp.KEY_DELIM + line + b"\n" for eid, line in events)
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", tp.EVENTS_TOPIC, "-K", "\t", "-z", "none"],
                   input=payload, check=True, timeout=60)


def judged(port):
    status, text = tp.http_get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return -1
    return int(sum(v for name, labels, v in tp.parse_metrics(text)
                   if name == "assay_events_judged_total"))


def ids_in(path):
    """The ids of the whole records of a JSON Lines file ([] before it exists)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line)["id"] for line in f if line.endswith("\n")]


def main():
    args = tp.common_args()
    workdir = tempfile.mkdtemp(prefix="assay_cg_")
    broker = a = b = None
    checks = tp.Checks()
    try:
        events = tp.load_dev_events(args.data)
        first, second = events[: len(events) // 2], events[len(events) // 2:]
        expected = {eid for eid, _ in events if tp.sampled(eid, RATE)}
        expected_first = {eid for eid, _ in first if tp.sampled(eid, RATE)}
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        group = f"cg-{os.getpid()}"
        procs = {}
        for name in ("A", "B"):
            port = tp.free_loopback_port()
            cfg = os.path.join(workdir, f"{name}.yaml")
            write_config(cfg, bootstrap, group, port, os.path.join(workdir, f"{name}.jsonl"))
            procs[name] = (cfg, port)

        def start(name):
            cfg, port = procs[name]
            log = open(os.path.join(workdir, f"{name}.log"), "wb")
            p = subprocess.Popen([args.assayd, "--config", cfg],
                                 stdout=log, stderr=log, start_new_session=True)
            log.close()
            tp.wait_for(f"{name} /readyz", lambda: tp.http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 30)
            return p

        a = start("A")
        produce(bootstrap, first)
        tp.wait_for("A to judge the first half", lambda: judged(procs["A"][1]) == len(expected_first), 30)
        tp.log(f"A judged the first half: {len(expected_first)} sampled events")
        # A is idle once its commit (every auto.commit.interval.ms, 5 s) reached every
        # partition's end: B then resumes exactly there.
        tp.wait_for("A's commit of the first half", lambda: all(
            c == e for c, e in tp.committed_vs_end(bootstrap, group, tp.EVENTS_TOPIC).values()), 30)
        b = start("B")  # the group rebalances now
        # Let the cooperative rebalance settle (A keeps some partitions, B takes the others):
        # librdkafka 2.0's mock coordinator refuses offset commits until it has (docs/ARCHITECTURE.md).
        def assigned(name):
            status, text = tp.http_get(f"http://127.0.0.1:{procs[name][1]}/metrics")
            return (tp.metric(tp.parse_metrics(text), "assay_consumer_assigned_partitions") or 0
                    if status == 200 else 0)
        tp.wait_for("the rebalance to give B partitions and leave none unassigned",
                 lambda: assigned("B") > 0 and assigned("A") + assigned("B") == tp.EVENTS_PARTITIONS, 60)
        produce(bootstrap, second)
        jsonl_a, jsonl_b = os.path.join(workdir, "A.jsonl"), os.path.join(workdir, "B.jsonl")
        tp.wait_for("every sampled event written by A or B",
                 lambda: set(ids_in(jsonl_a)) | set(ids_in(jsonl_b)) >= expected, 60)
        tp.wait_for("the commit of the second half", lambda: all(
            c == e for c, e in tp.committed_vs_end(bootstrap, group, tp.EVENTS_TOPIC).values()), 30)
        for p in (a, b):
            p.send_signal(signal.SIGTERM)
        rc_a = a.wait(timeout=90)
        rc_b = b.wait(timeout=90)
        checks.eq("A exit code", 0, rc_a)
        checks.eq("B exit code", 0, rc_b)
        ids_a, ids_b = ids_in(jsonl_a), ids_in(jsonl_b)
        all_ids = ids_a + ids_b
        union = set(all_ids)
        checks.eq("judged ids (A ∪ B) missing from the expected sampled set", 0, len(union - expected))
        checks.eq("expected sampled ids judged by neither A nor B", 0, len(expected - union))
        checks.eq("distinct ids judged", len(expected), len(union))
        checks.eq("events judged twice", 0, len(all_ids) - len(set(all_ids)))
        checks.true("B judged part of the second half", len(ids_b) > 0, f"B judged {len(ids_b)}")
        checks.true("A judged part of the second half", len(ids_a) > len(expected_first),
                    f"A judged {len(ids_a)} in all")
        with open(os.path.join(workdir, "A.log"), errors="replace") as f:
            log_a = f.read()
        checks.true("A gave partitions up during the run (cooperative revoke)",
                    "partition(s) revoked" in log_a.split("stopping")[0], "no revoke before A stopped")
        checks.true("A's commit on revoke succeeded", "commit on revoke failed" not in log_a,
                    "see A.log")
        offsets = tp.committed_vs_end(bootstrap, group, tp.EVENTS_TOPIC)
        checks.true("committed offsets == end offsets on every partition",
                    all(c == e for c, e in offsets.values()), offsets)
        tp.log(f"A judged {len(ids_a)}, B judged {len(ids_b)}; expected {len(expected)} in all")
    except tp.TestFailure as e:
        checks.true("test ran to the end", False, str(e))
    finally:
        for p, name in ((a, "A"), (b, "B"), (broker, "broker")):
            tp.stop_process(p, name)
        checks.report()
        if checks.failed():
            for name in ("A", "B"):
                print(f"--- {name}.log (tail)\n{tp.tail(os.path.join(workdir, name + '.log'))}")
        shutil.rmtree(workdir, ignore_errors=True)
    return checks.finish("two instances shared the group without losing or repeating an event")


if __name__ == "__main__":
    sys.exit(main())
