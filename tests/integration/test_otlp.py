#!/usr/bin/python3
"""OpenTelemetry traces from Kafka (kafka.format otlp_proto), joined into events; kill -9 while
traces are half-joined (issue 13).

  1. a broker process (tests/tools/mock_broker.cpp) with topic otlp.traces (4 partitions);
  2. the 20 dev traces of tests/data/otlp/dev_openinference.jsonl (5 traces a request), each
     request split in two messages: the LLM spans first, then the root and retrieval spans;
     encoded as protobuf by protoc from the text form of the JSON (json_to_txtpb.py: an encoder
     independent of assay) and produced with python3-confluent-kafka, both halves of a request
     on one partition (the Collector's partition_traces_by_id puts a trace on one partition);
  3. run A: assayd (otlp_proto, openinference, join timeout 3 s) reads batches 1-2 whole;
     of batches 3-4 only the LLM halves are produced, then assayd is killed with SIGKILL while
     those 10 traces wait in the join (assay_otlp_join_traces 10);
  4. the other halves of batches 3-4 are produced, plus one trace whose LLM span never comes;
  5. run B: assayd restarts in the same consumer group and runs until idle.

Asserts: every one of the 20 traces is judged (ids = trace ids, HaluQuestQA's 4 without
contexts: no_context, the others scored); run B assembles the 10 half-joined traces from
messages read again (their offsets were never committed); the trace without an LLM span is
counted no_answer after the timeout and its message's offset is released: the group's
committed offsets reach the end of every partition.
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

from confluent_kafka import Producer  # noqa: E402

TOPIC, PARTITIONS = "otlp.traces", 4
GROUP = "assay-otlp-test"
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data", "otlp")


def protoc_encode(request):
    """OTLP/JSON request (dict) → protobuf bytes, by protoc."""
    text = subprocess.run([sys.executable, os.path.join(DATA, "json_to_txtpb.py")],
                          input=json.dumps(request).encode(), capture_output=True, check=True).stdout
    return subprocess.run(["protoc", "--encode=assay.test.otlp.ExportTraceServiceRequest",
                           f"--proto_path={DATA}", "otlp_trace.proto"], input=text,
                          capture_output=True, check=True).stdout


def split(request):
    """(LLM spans only, every other span) of one request, as two requests."""
    def keep(pred):
        r = json.loads(json.dumps(request))
        for rs in r["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [s for s in ss["spans"] if pred(s)]
        return r

    def is_llm(s):
        return any(a["key"] == "openinference.span.kind" and a["value"].get("stringValue") == "LLM"
                   for a in s["attributes"])
    return keep(is_llm), keep(lambda s: not is_llm(s))


def trace_ids(request):
    return {s["traceId"] for rs in request["resourceSpans"] for ss in rs["scopeSpans"]
            for s in ss["spans"]}


def produce(bootstrap, messages):
    """[(partition, bytes)] into TOPIC, in order, acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, value in messages:
        p.produce(TOPIC, value=value, partition=partition)
    if p.flush(30) != 0:
        raise tp.TestFailure("the broker did not acknowledge the produced messages")


def write_config(path, bootstrap, admin, jsonl):
    with open(path, "w") as f:
        f.write(f"""kafka:
  brokers: {bootstrap}
  format: otlp_proto
  topic: {TOPIC}
  group_id: {GROUP}
  properties:
    session.timeout.ms: 6000
otlp:
  mapping: openinference
  join_timeout_ms: 3000
sampling: {{rate: 1.0}}
judges:
  - {{name: claim_support, kind: lexical, metric: claim_support}}
  - {{name: context_count, kind: check, check: context_count, min: 1}}
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")


def metrics(url):
    status, text = tp.http_get(url + "/metrics")
    return tp.parse_metrics(text) if status == 200 else []


def run(args, workdir, checks):
    requests = [json.loads(l) for l in open(os.path.join(DATA, "dev_openinference.jsonl")) if l.strip()]
    if len(requests) != 4:
        raise tp.TestFailure(f"expected 4 requests of 5 traces in dev_openinference.jsonl, got {len(requests)}")
    halves = [split(r) for r in requests]
    all_ids = set().union(*(trace_ids(r) for r in requests))
    encoded = [(protoc_encode(llm), protoc_encode(rest)) for llm, rest in halves]
    # One more trace: root and retriever only, its LLM span never produced.
    orphan = json.loads(json.dumps(halves[0][1]))
    for rs in orphan["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [dict(s, traceId="f" * 32) for s in ss["spans"][:2]]
    orphan_bytes = protoc_encode(orphan)

    broker, bootstrap = tp.start_broker(args.mock_broker, workdir, [f"{TOPIC}:{PARTITIONS}"])
    daemon = None
    try:
        admin = tp.free_loopback_port()
        url = f"http://127.0.0.1:{admin}"
        jsonl = os.path.join(workdir, "j.jsonl")
        cfg = os.path.join(workdir, "c.yaml")
        write_config(cfg, bootstrap, admin, jsonl)
        # Batches 1-2 whole (LLM half first), batches 3-4 LLM halves only.
        produce(bootstrap, [(i % PARTITIONS, encoded[i][0]) for i in range(4)] +
                [(i % PARTITIONS, encoded[i][1]) for i in range(2)])
        log_a = open(os.path.join(workdir, "assayd-a.log"), "wb")
        daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log_a, stderr=log_a,
                                  start_new_session=True)
        tp.wait_for("10 judgments from run A", lambda: os.path.exists(jsonl) and
                    sum(1 for _ in open(jsonl)) >= 10, 60)
        tp.wait_for("10 traces waiting in the join",
                    lambda: tp.metric(metrics(url), "assay_otlp_join_traces") == 10, 30)
        samples = metrics(url)
        checks.eq("run A: traces assembled before the kill", 10,
                  tp.metric(samples, "assay_otlp_traces_assembled_total"))
        checks.eq("run A: spans kept (10 whole traces + 10 LLM spans)", 40,
                  tp.metric(samples, "assay_otlp_spans_total", outcome="kept"))
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=10)
        daemon = None
        run_a = [json.loads(l) for l in open(jsonl)]
        checks.eq("run A: judgments written", 10, len(run_a))

        produce(bootstrap, [(i % PARTITIONS, encoded[i][1]) for i in range(2, 4)] +
                [(0, orphan_bytes)])
        log_b = open(os.path.join(workdir, "assayd-b.log"), "wb")
        t0 = time.monotonic()
        daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log_b, stderr=log_b,
                                  start_new_session=True)

        def incomplete():
            return tp.metric(metrics(url), "assay_otlp_traces_incomplete_total",
                             missing="no_answer", action="counted")
        tp.wait_for("the trace without an LLM span counted after the 3 s timeout",
                    lambda: incomplete() == 1, 90)
        tp.wait_for("the join gauge at 0 (refreshed once a second)",
                    lambda: tp.metric(metrics(url), "assay_otlp_join_traces") == 0, 5)
        samples = metrics(url)
        log(f"run B: the join emptied {time.monotonic() - t0:.1f} s after the restart")
        assembled_b = tp.metric(samples, "assay_otlp_traces_assembled_total")
        checks.true("run B: traces assembled: the 10 half-joined ones at least (from messages "
                    "read again; the whole traces too when run A died before its first commit)",
                    assembled_b in (10, 20), f"{assembled_b}")
        checks.eq("run B: traces waiting", 0, tp.metric(samples, "assay_otlp_join_traces"))
        checks.eq("run B: join bytes", 0, tp.metric(samples, "assay_otlp_join_bytes"))
        tp.stop_process(daemon, "assayd")  # SIGTERM: a clean stop commits
        checks.eq("run B: exit code after SIGTERM", 0, daemon.returncode)
        daemon = None
        judgments = [json.loads(l) for l in open(jsonl)]
        judged = {j["id"] for j in judgments}
        checks.eq("every trace judged (no loss across kill -9)", sorted(all_ids),
                  sorted(judged & all_ids))
        checks.eq("the trace without an LLM span is not judged", False, "f" * 32 in judged)
        outcomes = {}
        for j in judgments:
            for v in j["verdicts"]:
                if v["judge"] == "claim_support":
                    outcomes[j["id"]] = v.get("error") or "ok"
        counts = {}
        for o in outcomes.values():
            counts[o] = counts.get(o, 0) + 1
        checks.eq("claim_support outcomes over the 20 traces", {"no_context": 4, "ok": 16},
                  dict(sorted(counts.items())))
        rerun = {j["id"] for j in judgments[len(run_a):]}
        half_joined = all_ids - {j["id"] for j in run_a}
        checks.eq("run B judged the 10 half-joined traces", sorted(half_joined),
                  sorted(half_joined & rerun))
        log(f"{len(rerun & {j['id'] for j in run_a})} trace(s) judged again after the kill "
            "(at least once: run A's last commit came before them)")
        ends = tp.committed_vs_end(bootstrap, GROUP, TOPIC)
        checks.eq("committed offsets at the end of every partition (the orphan's released too)",
                  {p: e for p, (c, e) in ends.items()}, {p: c for p, (c, e) in ends.items()})
        return f"{len(all_ids)} traces judged across a kill -9 in the middle of the join"
    finally:
        tp.stop_process(daemon, "assayd")
        tp.stop_process(broker, "mock broker")


def log(msg):
    print(f"[test_otlp] {msg}", flush=True)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_otlp", run))
