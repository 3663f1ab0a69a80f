#!/usr/bin/python3
"""End-to-end test of assayd: Kafka -> hash sampling -> cheap judges -> JSON Lines, results
topic, dead-letter topic and Prometheus metrics (issue 2, "Tests").

  1. starts a Kafka broker in its own process (tests/tools/mock_broker.cpp: librdkafka's mock
     cluster on loopback) with an events topic, a results topic and a dead-letter topic;
  2. produces the dev data with kcat (an independent client), keyed by each event's id, plus
     five invalid messages without a key (so assayd must parse them): invalid UTF-8, not JSON,
     no `answer`, larger than limits.max_event_bytes; and one garbage message keyed by an id that
     is NOT sampled (assayd must skip it unparsed: consumed, but neither invalid nor dead-lettered);
  3. writes a config (sampling rate 0.5, a judge with a nested rate 0.5) and checks it with
     `assayd --check-config`;
  4. runs `assayd --config FILE --exit-when-idle 4`, polls /metrics until everything is consumed
     and judged, checks /healthz and /readyz, runs `promtool check metrics` on /metrics, and waits
     for assayd to stop by itself with exit code 0;
  5. asserts exact counts computed independently here with python3-xxhash (docs/configuration.md, "Sampling":
     sampled iff XXH3_64(id) < rate * 2^64) against the JSON Lines file, the metrics, the results
     topic and the dead-letter topic.

Run by ctest (tests/CMakeLists.txt):
  /usr/bin/python3 test_pipeline.py --assayd PATH --mock-broker PATH --data rag_events_dev.jsonl
Only loopback is used; everything started is stopped, and the temporary directory removed
(unless --keep-temp), even on failure. Exit code 0 = every check passed, 1 = a check failed.
"""

import argparse
import atexit
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import xxhash
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

SAMPLING_RATE = 0.5
NESTED_JUDGE_RATE = 0.5  # the judge "token_f1_half" runs on h < 0.5 * 0.5 * 2^64
EXIT_WHEN_IDLE_S = 4
EVENTS_TOPIC, EVENTS_PARTITIONS = "integ.events", 6
RESULTS_TOPIC, RESULTS_PARTITIONS = "integ.judgments", 3
DLQ_TOPIC, DLQ_PARTITIONS = "integ.dlq", 2
KEY_DELIM = b"\t"  # kcat -K: kcat splits at the first one, so only keys and unkeyed lines must lack it
# Judges with rate 1 (they run on every sampled event), and one with a nested rate.
FULL_RATE_JUDGES = ["answer_nonempty", "citation", "context_count", "rouge_l", "context_overlap"]
NESTED_JUDGE = "token_f1_half"
INVALID_REASONS = ["not_utf8", "not_json", "missing_field", "too_large", "too_deep"]


class TestFailure(Exception):
    pass


def log(msg):
    print(f"[test_pipeline] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Independent expectations


def sampled(event_id, rate):
    """docs/configuration.md, "Sampling", with python3-xxhash: exact int-vs-float comparison in Python."""
    return xxhash.xxh3_64_intdigest(event_id.encode("utf-8")) < rate * 2**64


def load_dev_events(path):
    """Returns [(id, raw line bytes without the newline)], checking what the test relies on."""
    events = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip():
                continue
            ev = json.loads(line)
            eid = ev.get("id")
            if not isinstance(eid, str) or not eid:
                raise TestFailure(f"{path}:{n}: the test needs a string id on every event")
            if KEY_DELIM in eid.encode() or "\n" in eid:
                raise TestFailure(f"{path}:{n}: id {eid!r} contains the kcat key delimiter")
            if not isinstance(ev.get("question"), str) or not isinstance(ev.get("answer"), str):
                raise TestFailure(f"{path}:{n}: the dev data should hold valid events only")
            events.append((eid, line))
    ids = [e for e, _ in events]
    if len(set(ids)) != len(ids):
        raise TestFailure(f"{path}: ids are not unique; the id-set assertions need them to be")
    return events


def unsampled_key(rate):
    """An id the sampler rejects at `rate` (found deterministically)."""
    for i in range(1000):
        k = f"integ-unsampled-{i}"
        if not sampled(k, rate):
            return k
    raise TestFailure("no unsampled key found")  # probability 2^-1000


def invalid_messages(max_event_bytes):
    """The five invalid messages (no key), keyed by the reason assayd must report."""
    big_answer = "x" * (max_event_bytes + 1000)
    too_large = json.dumps({"id": "integ-too-large", "question": "Is this too large?",
                            "answer": big_answer}).encode()
    msgs = {
        # Valid JSON but for one 0xFF byte inside a string: invalid UTF-8.
        "not_utf8": b'{"id": "integ-bad-utf8", "question": "q?", "answer": "caf\xff"}',
        "not_json": b"this is not JSON {\"id\": \"integ-not-json\"",
        "missing_field": json.dumps({"id": "integ-no-answer", "question": "Where is the answer?",
                                     "contexts": ["nothing here"]}).encode(),
        # A complete, valid event but for its size.
        "too_large": too_large,
        # Contexts nested 5,000 arrays deep (10 KB, under the size limit): refused before
        # RapidJSON's recursive parser sees it (core/json_limits.hpp).
        "too_deep": (b'{"id": "integ-too-deep", "question": "q?", "answer": "a", "contexts": '
                     + b"[" * 5000 + b"]" * 5000 + b"}"),
    }
    for reason, m in msgs.items():
        assert KEY_DELIM not in m and b"\n" not in m, reason
    assert len(msgs["too_large"]) > max_event_bytes
    return msgs


# ---------------------------------------------------------------------------------------------
# Processes


def start_broker(mock_broker, workdir, topics=None, options=()):
    """The broker process with `topics` ("NAME:PARTITIONS[@LEADER]"; default: the events,
    results and dead-letter topics) and mock_broker `options` (--brokers N, --coordinator
    GROUP@ID); returns (process, bootstrap). Its stdin takes "down [ID]"/"up [ID]"."""
    topics = topics or [f"{EVENTS_TOPIC}:{EVENTS_PARTITIONS}",
                        f"{RESULTS_TOPIC}:{RESULTS_PARTITIONS}", f"{DLQ_TOPIC}:{DLQ_PARTITIONS}"]
    args = [mock_broker, *options, *topics]
    err = open(os.path.join(workdir, "mock_broker.log"), "wb")
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                            start_new_session=True)
    err.close()
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline().decode().strip() if ready else ""
    if not re.fullmatch(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+)*", line):
        raise TestFailure(f"mock broker did not print a loopback bootstrap address (got {line!r}, "
                          f"exit code {proc.poll()})")
    return proc, line


def signal_group(proc, sig):
    """Signals the process group the test created for `proc` (start_new_session=True)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_interrupted = False


def _interrupted_by(signum, _frame):
    """A SIGTERM, SIGHUP or SIGINT (an interrupted ctest or CI run) unwinds, so that each
    test's `finally` stops the processes it started, at once (stop_process): they run in
    sessions of their own, which a signal to the test's process group does not reach."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt(f"signal {signum}")


def _kill_children():
    """At exit: every process this one started and that still runs, with its group. A test
    stops what it started in its `finally`; this catches what it never held (a helper
    interrupted before it handed its process over, a wait that raised)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            for kill in (lambda: os.killpg(int(entry), signal.SIGKILL),
                         lambda: os.kill(int(entry), signal.SIGKILL)):
                try:
                    kill()
                except OSError:
                    pass


# Every integration script imports this module first.
signal.signal(signal.SIGTERM, _interrupted_by)
signal.signal(signal.SIGHUP, _interrupted_by)
if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored by the parent
    signal.signal(signal.SIGINT, _interrupted_by)
atexit.register(_kill_children)


def stop_process(proc, name, term_timeout=20):
    """SIGTERM, then SIGKILL after term_timeout; also reaps anything left in its group."""
    if proc is None:
        return
    if _interrupted:  # the run is being torn down: no time for a clean stop
        signal_group(proc, signal.SIGKILL)
        return
    if proc.poll() is None:
        try:
            if proc.stdin:
                proc.stdin.close()  # the mock broker exits when its stdin closes
        except OSError:
            pass
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=term_timeout)
        except subprocess.TimeoutExpired:
            log(f"{name} (pid {proc.pid}) ignored SIGTERM for {term_timeout} s: killing it")
            signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=10)
    signal_group(proc, signal.SIGKILL)  # stray children, if any


def common_args(*extra):
    """The arguments ctest passes to every integration script (tests/CMakeLists.txt), plus
    `extra` (name, type, default) options of a script's own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--assayd", required=True)
    ap.add_argument("--mock-broker")
    ap.add_argument("--data", required=True)
    ap.add_argument("--keep-temp", action="store_true", help="keep the temporary directory")
    for name, kind, default in extra:
        ap.add_argument(name, type=kind, default=default)
    return ap.parse_args()


def produce_keyed(bootstrap, topic, events):
    """Produces [(id, raw event bytes)] with kcat, keyed by id."""
    payload = b"".join(e.encode() + KEY_DELIM + raw + b"\n" for e, raw in events)
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-z", "none"],
                   input=payload, check=True, timeout=120, capture_output=True)


def wait_for(what, predicate, timeout, step=0.1):
    """Polls `predicate` until it is true; TestFailure naming `what` after `timeout` s. With
    ASSAY_TEST_WAIT_LOG=FILE each wait appends "<what> <milliseconds waited>" to FILE: how the
    deadlines of docs/testing.md ("Timing") are measured."""
    start = time.monotonic()
    deadline = start + timeout
    ok = predicate()
    while not ok and time.monotonic() < deadline:
        time.sleep(step)
        ok = predicate()  # also once the deadline has passed: the last look decides
    if os.environ.get("ASSAY_TEST_WAIT_LOG"):
        with open(os.environ["ASSAY_TEST_WAIT_LOG"], "a") as f:
            f.write(f"{what} {(time.monotonic() - start) * 1000:.0f}{'' if ok else ' TIMEOUT'}\n")
    if not ok:
        raise TestFailure(f"timed out after {timeout} s waiting for {what}")
    return True


def start_fake_provider(assayd, *extra):
    """Starts tests/tools/fake_llm_server.cpp (built next to assayd); returns (process, port)."""
    binary = os.path.join(os.path.dirname(os.path.dirname(assayd)), "tests", "assay_fake_llm_server")
    proc = subprocess.Popen([binary, "--port", "0", *extra], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, start_new_session=True)
    line = proc.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "LISTENING":
        raise TestFailure(f"fake provider did not start: {line}")
    return proc, int(line[1])


def run_script(name, run, args=None):
    """The main of a script test: arguments (common_args() unless given), a temporary directory
    (removed after, unless args.keep_temp), `run(args, workdir, checks)` returning a summary
    line, the report; returns the exit code."""
    args = args or common_args()
    workdir = tempfile.mkdtemp(prefix=f"assay-{name}-")
    checks = Checks()
    summary = error = None
    try:
        summary = run(args, workdir, checks)
    except TestFailure as e:
        error = str(e)
    except Exception as e:  # an unexpected error is a failure too, with its type
        error = f"{type(e).__name__}: {e}"
    finally:
        if getattr(args, "keep_temp", False):
            log(f"temporary files kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"==== {name} summary ====")
    checks.report()
    if error:
        print(f"ERROR: {error}")
        return 1
    return checks.finish(summary)


def start_redis(workdir, port=None):
    """A real redis-server on `port` (default: a free loopback port), no persistence; returns
    (process, port)."""
    port = port or free_loopback_port()
    proc = subprocess.Popen(["/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", workdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(100):
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                          text=True).stdout.strip() == "PONG":
            return proc, port
        time.sleep(0.1)
    raise TestFailure("redis-server did not answer PING")


def start_overlap_daemon(assayd, workdir, bootstrap, group, kafka_extra=None, args=()):
    """assayd at rate 1.0 with one context_overlap judge and a JSON Lines file, consuming
    EVENTS_TOPIC in consumer group `group`, its admin endpoint on a free port; `kafka_extra`
    adds kafka keys (results_topic, properties…), `args` command-line options. Returns
    (process, admin URL, JSON Lines path, log path) once /readyz answers 200."""
    admin = free_loopback_port()
    url = f"http://127.0.0.1:{admin}"
    jsonl = os.path.join(workdir, "j.jsonl")
    cfg = os.path.join(workdir, "c.yaml")
    kafka = {"brokers": bootstrap, "topic": EVENTS_TOPIC, "group_id": group, **(kafka_extra or {})}
    with open(cfg, "w") as f:
        f.write(f"""kafka: {json.dumps(kafka)}
sampling: {{rate: 1.0}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")
    log_path = os.path.join(workdir, "assayd.log")
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([assayd, "--config", cfg, *args], stdout=log, stderr=log,
                                  start_new_session=True)
    try:
        wait_for("/readyz 200", lambda: http_get(url + "/readyz")[0] == 200, 30)
    except TestFailure:
        stop_process(daemon, "assayd")
        raise
    return daemon, url, jsonl, log_path


def scrape_until(url, ready, timeout, step=0.3):
    """Scrapes `url`/metrics until ready(samples) holds or `timeout` s pass; returns (samples,
    text) of the last scrape either way, for the caller's checks to say what differs. For the
    gauges assayd refreshes once a second (the score tracker): they reach their final values
    at the first refresh after the last input, so a test waits for those values instead of a
    fixed time. Logged like wait_for (ASSAY_TEST_WAIT_LOG)."""
    last = ([], "")

    def scraped():
        nonlocal last
        status, text = http_get(url + "/metrics")
        if status != 200:
            return False
        last = (parse_metrics(text), text)
        return ready(last[0])
    try:
        wait_for(f"{url}/metrics ready", scraped, timeout, step)
    except TestFailure:
        pass
    return last


def judged_count(url):
    """assay_events_judged_total from `url`'s /metrics; -1 while it does not answer."""
    status, text = http_get(url + "/metrics")
    return metric(parse_metrics(text), "assay_events_judged_total") if status == 200 else -1


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=2.0):
    """(status, body text); status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


# ---------------------------------------------------------------------------------------------
# Prometheus text format

SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise TestFailure(f"unparsable /metrics line: {line!r}")
        labels = dict(LABEL_RE.findall(m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples


def coverage_gaps(samples):
    """Coverage (docs/metrics.md, "Coverage"): per judge, consumed events that no terminal
    counter accounts for, minus those in flight (consumed − finished): the recording rule
    assay:judge_coverage_unaccounted:events. {} when no judge has a series."""
    total = lambda name: sum(v for n, _, v in samples if n == name)  # noqa: E731
    finished = total("assay_events_finished_total")
    ended = sum(total(n) for n in ("assay_events_replay_skipped_total", "assay_events_invalid_total",
                                   "assay_events_sampled_out_total", "assay_samples_dropped_total"))
    terminal = {}
    for n, l, v in samples:
        if n in ("assay_judge_runs_total", "assay_judge_skipped_total",
                 "assay_judge_abandoned_total"):
            terminal[l["judge"]] = terminal.get(l["judge"], 0) + v
    return {judge: finished - ended - t for judge, t in terminal.items()}


def metric(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`; None when there is none."""
    vals = [v for n, l, v in samples
            if n == name and all(l.get(k) == want for k, want in labels.items())]
    if not vals:
        return None
    total = sum(vals)
    return int(total) if total == int(total) else total


# ---------------------------------------------------------------------------------------------
# Kafka read-back (confluent_kafka, assign() without a group: no rebalance wait)


def read_topic(bootstrap, topic, timeout_s=30):
    """Every message of `topic`: [(key bytes|None, value bytes, {header: value bytes})]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "integ-reader",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "auto.offset.reset": "earliest"})
    try:
        md = c.list_topics(topic, timeout=10)
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            raise TestFailure(f"topic {topic}: no metadata ({tmd.error if tmd else 'absent'})")
        want = 0
        tps = []
        for p in sorted(tmd.partitions):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            want += hi - lo
            tps.append(TopicPartition(topic, p, OFFSET_BEGINNING))
        out = []
        if want:
            c.assign(tps)
            deadline = time.monotonic() + timeout_s
            while len(out) < want and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise TestFailure(f"reading {topic}: {m.error()}")
                    continue
                out.append((m.key(), m.value(), dict(m.headers() or [])))
            if len(out) < want:
                raise TestFailure(f"reading {topic}: got {len(out)} of {want} messages in "
                                  f"{timeout_s} s")
        return out
    finally:
        c.close()


def committed_vs_end(bootstrap, group_id, topic):
    """{partition: (committed offset of group_id, high watermark)} for every partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                  "enable.auto.commit": False})
    try:
        tmd = c.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p) for p in sorted(tmd.partitions)]
        committed = c.committed(tps, timeout=10)
        return {tp.partition: (tp.offset, c.get_watermark_offsets(tp, timeout=10)[1])
                for tp in committed}
    finally:
        c.close()


def topic_message_count(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "integ-reader"})
    try:
        tmd = c.list_topics(topic, timeout=10).topics[topic]
        total = 0
        for p in tmd.partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += hi - lo
        return total
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# The test


class Checks:
    def __init__(self):
        self.rows = []

    def eq(self, what, expected, actual):
        self.rows.append((what, expected, actual, expected == actual))
        return expected == actual

    def true(self, what, ok, detail_if_failed=""):
        self.rows.append((what, "yes", "yes" if ok else f"no ({detail_if_failed})", bool(ok)))
        return bool(ok)

    def finish(self, passed_message):
        """Prints the verdict line and returns the exit code (0 = every check passed)."""
        if self.failed():
            print(f"FAILED: {len(self.failed())} check(s)")
            return 1
        print(f"PASSED: {passed_message}")
        return 0

    def failed(self):
        return [r for r in self.rows if not r[3]]

    def report(self):
        for what, expected, actual, ok in self.rows:
            status = "ok  " if ok else "FAIL"
            if ok:
                print(f"  {status} {what}: {actual}")
            else:
                print(f"  {status} {what}: expected {expected}, actual {actual}")


def write_config(path, bootstrap, group_id, port, jsonl_path, max_event_bytes):
    q = json.dumps  # a JSON string is a valid YAML double-quoted scalar
    text = f"""# written by tests/integration/test_pipeline.py
kafka:
  brokers: {q(bootstrap)}
  topic: {q(EVENTS_TOPIC)}
  group_id: {q(group_id)}
  results_topic: {q(RESULTS_TOPIC)}
  dead_letter_topic: {q(DLQ_TOPIC)}
sampling:
  rate: {SAMPLING_RATE}
limits:
  queue_capacity: 10000
  max_event_bytes: {max_event_bytes}
  workers: 2
judges:
  - {{name: answer_nonempty, kind: check, check: answer_nonempty}}
  - {{name: citation, kind: check, check: cites_source}}
  - {{name: context_count, kind: check, check: context_count, min: 1}}
  - {{name: rouge_l, kind: lexical, metric: rouge_l}}
  - {{name: context_overlap, kind: lexical, metric: context_overlap}}
  - {{name: {NESTED_JUDGE}, kind: lexical, metric: token_f1, rate: {NESTED_JUDGE_RATE}}}
tracking:
  max_label_values: 50
admin:
  listen: "127.0.0.1:{port}"
sinks:
  jsonl: {{path: {q(jsonl_path)}}}
log:
  level: info
"""
    with open(path, "w") as f:
        f.write(text)


def tail(path, n=40):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])
    except OSError:
        return "(no log)"


def run(args, workdir, checks):
    t_start = time.monotonic()
    broker = assayd = None
    assayd_log = os.path.join(workdir, "assayd.log")
    finished = False
    try:
        # ---- Expectations, from the data alone.
        events = load_dev_events(args.data)
        max_valid = max(len(line) for _, line in events)
        # 20000 when every dev event fits; otherwise just above the largest valid event.
        max_event_bytes = max(20000, (max_valid // 1024 + 2) * 1024)
        invalid = invalid_messages(max_event_bytes)
        skip_key = unsampled_key(SAMPLING_RATE)
        expected_ids = {eid for eid, _ in events if sampled(eid, SAMPLING_RATE)}
        expected_nested = {eid for eid in expected_ids
                           if sampled(eid, NESTED_JUDGE_RATE * SAMPLING_RATE)}
        n_messages = len(events) + len(invalid) + 1
        log(f"dev data: {len(events)} valid events (largest {max_valid} bytes; "
            f"max_event_bytes {max_event_bytes}); expected sampled at rate {SAMPLING_RATE}: "
            f"{len(expected_ids)}; nested judge ({NESTED_JUDGE_RATE}): {len(expected_nested)}; "
            f"messages to produce: {n_messages}")

        # ---- Broker in its own process.
        broker, bootstrap = start_broker(args.mock_broker, workdir)
        log(f"mock broker pid {broker.pid} at {bootstrap}")

        # ---- Produce with kcat: valid events keyed by id, invalid ones between them, no key.
        payload = bytearray()
        slots = {len(events) * (i + 1) // (len(invalid) + 2): r for i, r in enumerate(invalid)}
        slots_skip = len(events) * (len(invalid) + 1) // (len(invalid) + 2) + 1
        for i, (eid, line) in enumerate(events):
            if i in slots:
                payload += invalid[slots[i]] + b"\n"  # no key delimiter: a NULL key
            if i == slots_skip:
                payload += skip_key.encode() + KEY_DELIM + b"garbage, but never parsed\n"
            payload += eid.encode() + KEY_DELIM + line + b"\n"
        input_path = os.path.join(workdir, "kcat_input.txt")
        with open(input_path, "wb") as f:
            f.write(payload)
        with open(input_path, "rb") as f:
            t0 = time.monotonic()
            kc = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", EVENTS_TOPIC,
                                 "-K", KEY_DELIM.decode()],
                                stdin=f, capture_output=True, timeout=120)
        if kc.returncode != 0:
            raise TestFailure(f"kcat -P exited {kc.returncode}: {kc.stderr.decode()[-2000:]}")
        in_topic = topic_message_count(bootstrap, EVENTS_TOPIC)
        log(f"kcat produced into {EVENTS_TOPIC} in {time.monotonic() - t0:.2f} s: "
            f"{in_topic} messages")
        if in_topic != n_messages:
            raise TestFailure(f"events topic holds {in_topic} messages, expected {n_messages}: "
                              f"kcat stderr: {kc.stderr.decode()[-2000:]}")

        # ---- Config, checked first.
        config_path = os.path.join(workdir, "assayd.yaml")
        jsonl_path = os.path.join(workdir, "out", "judgments.jsonl")
        group_id = f"integ-{os.getpid()}-{int(time.time())}"
        for attempt in range(3):
            port = free_loopback_port()
            write_config(config_path, bootstrap, group_id, port, jsonl_path, max_event_bytes)
            cc = subprocess.run([args.assayd, "--check-config", config_path],
                                capture_output=True, timeout=30)
            if not checks.eq("assayd --check-config exit code", 0, cc.returncode):
                raise TestFailure("--check-config: " + (cc.stdout + cc.stderr).decode())

            # ---- Run assayd.
            with open(assayd_log, "ab") as lf:
                assayd = subprocess.Popen(
                    [args.assayd, "--config", config_path,
                     "--exit-when-idle", str(EXIT_WHEN_IDLE_S)],
                    stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                    start_new_session=True)
            log(f"assayd pid {assayd.pid}, admin on 127.0.0.1:{port}")
            time.sleep(0.3)
            if assayd.poll() == 2 and "cannot listen" in tail(assayd_log):
                log(f"port {port} was taken meanwhile; retrying")
                assayd = None
                continue
            break
        if assayd is None:
            raise TestFailure("three free loopback ports were taken before assayd could listen")
        base = f"http://127.0.0.1:{port}"

        # ---- Poll /metrics until everything is consumed and the judged count settles.
        t_run = time.monotonic()
        deadline = t_run + 120
        last_judged, judged_since = None, time.monotonic()
        metrics_text = None
        while time.monotonic() < deadline:
            if assayd.poll() is not None:
                raise TestFailure(f"assayd exited with {assayd.returncode} before the test saw "
                                  f"every message consumed and judged")
            status, text = http_get(base + "/metrics")
            if status == 200:
                s = parse_metrics(text)
                consumed = metric(s, "assay_events_consumed_total") or 0
                judged = metric(s, "assay_events_judged_total") or 0
                depth = metric(s, "assay_queue_depth")
                if judged != last_judged:
                    last_judged, judged_since = judged, time.monotonic()
                if (consumed >= n_messages and depth == 0 and
                        time.monotonic() - judged_since >= 1.0):
                    metrics_text = text
                    break
            time.sleep(0.2)
        if metrics_text is None:
            raise TestFailure(f"within 120 s /metrics never showed {n_messages} consumed with a "
                              f"settled judged count and an empty queue")
        log(f"everything consumed and judged {time.monotonic() - t_run:.1f} s after start")

        checks.eq("GET /healthz", 200, http_get(base + "/healthz")[0])
        checks.eq("GET /readyz", 200, http_get(base + "/readyz")[0])
        metrics_file = os.path.join(workdir, "metrics.txt")
        with open(metrics_file, "w") as f:
            f.write(metrics_text)
        with open(metrics_file, "rb") as f:
            pt = subprocess.run(["promtool", "check", "metrics"], stdin=f,
                                capture_output=True, timeout=60)
        if pt.returncode != 0:
            print((pt.stdout + pt.stderr).decode(), flush=True)
        checks.eq("promtool check metrics exit code", 0, pt.returncode)

        # ---- assayd stops by itself once idle.
        try:
            rc = assayd.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = "still running after 60 s"
        checks.eq(f"assayd --exit-when-idle {EXIT_WHEN_IDLE_S} exit code", 0, rc)
        run_s = time.monotonic() - t_run

        # ---- Metrics.
        s = parse_metrics(metrics_text)
        n_exp = len(expected_ids)
        checks.eq("assay_events_consumed_total", n_messages,
                  metric(s, "assay_events_consumed_total", topic=EVENTS_TOPIC))
        for reason in INVALID_REASONS:
            checks.eq(f'assay_events_invalid_total{{reason="{reason}"}}', 1,
                      metric(s, "assay_events_invalid_total", reason=reason))
        checks.eq('assay_events_invalid_total{reason="wrong_type"}', 0,
                  metric(s, "assay_events_invalid_total", reason="wrong_type"))
        checks.eq("assay_events_dead_lettered_total", len(invalid),
                  metric(s, "assay_events_dead_lettered_total"))
        checks.eq("sum of assay_events_sampled_total", n_exp,
                  metric(s, "assay_events_sampled_total"))
        checks.eq("assay_events_judged_total", n_exp, metric(s, "assay_events_judged_total"))
        checks.eq("sum of assay_samples_dropped_total", 0,
                  metric(s, "assay_samples_dropped_total"))
        for j in FULL_RATE_JUDGES:
            checks.eq(f'assay_judge_runs_total{{judge="{j}"}} summed over outcomes', n_exp,
                      metric(s, "assay_judge_runs_total", judge=j))
        checks.eq(f'assay_judge_runs_total{{judge="{NESTED_JUDGE}"}} (nested rate '
                  f'{NESTED_JUDGE_RATE})', len(expected_nested),
                  metric(s, "assay_judge_runs_total", judge=NESTED_JUDGE))
        ok_runs = metric(s, "assay_judge_runs_total", judge="rouge_l", outcome="ok") or 0
        checks.eq('assay_judge_score_count{judge="rouge_l"} == its ok runs', ok_runs,
                  metric(s, "assay_judge_score_count", judge="rouge_l"))
        checks.eq('assay_sink_writes_total{sink="jsonl",result="ok"}', n_exp,
                  metric(s, "assay_sink_writes_total", sink="jsonl", result="ok"))
        checks.eq('assay_sink_writes_total{sink="kafka",result="ok"}', n_exp,
                  metric(s, "assay_sink_writes_total", sink="kafka", result="ok"))
        checks.eq("assay_queue_depth", 0, metric(s, "assay_queue_depth"))
        checks.eq("assay_build_info", 1, metric(s, "assay_build_info"))

        # ---- JSON Lines.
        with open(jsonl_path, "rb") as f:
            lines = [l for l in f.read().split(b"\n") if l]
        judgments = [json.loads(l) for l in lines]
        jsonl_ids = [j["id"] for j in judgments]
        checks.eq("JSON Lines line count", n_exp, len(lines))
        checks.eq("JSON Lines: ids are unique", len(jsonl_ids), len(set(jsonl_ids)))
        missing, extra = expected_ids - set(jsonl_ids), set(jsonl_ids) - expected_ids
        checks.true("JSON Lines id set == expected sampled id set", not missing and not extra,
                    f"{len(missing)} missing {sorted(missing)[:5]}, "
                    f"{len(extra)} unexpected {sorted(extra)[:5]}")
        bad_verdicts = []
        for j in judgments:
            names = [v["judge"] for v in j.get("verdicts", [])]
            want = list(FULL_RATE_JUDGES) + ([NESTED_JUDGE] if j["id"] in expected_nested else [])
            if sorted(names) != sorted(want):
                bad_verdicts.append((j["id"], names))
        checks.true("every judgment holds exactly its judges' verdicts (nested rate included)",
                    not bad_verdicts, f"{len(bad_verdicts)} wrong, e.g. {bad_verdicts[:2]}")

        # ---- Delivery guarantee: every event finished, so the group committed the end of
        # ---- every partition (offsets are stored only for finished events).
        offsets = committed_vs_end(bootstrap, group_id, EVENTS_TOPIC)
        behind = {p: c for p, c in offsets.items() if c[0] != c[1]}
        checks.true(f"group {group_id} committed the end offset of all {len(offsets)} "
                    f"partitions", not behind, f"partition: (committed, end) {behind}")

        # ---- Results and dead-letter topics.
        results = read_topic(bootstrap, RESULTS_TOPIC)
        checks.eq(f"messages in results topic {RESULTS_TOPIC}", n_exp, len(results))
        res_keys = [k.decode() if k is not None else None for k, _, _ in results]
        res_ids = [json.loads(v)["id"] for _, v, _ in results]
        checks.true("results topic: key == judgment id on every message", res_keys == res_ids,
                    "keys differ from ids")
        checks.true("results topic id set == expected sampled id set",
                    set(res_ids) == expected_ids and len(res_ids) == len(set(res_ids)),
                    f"{len(set(res_ids) ^ expected_ids)} ids differ")

        dlq = read_topic(bootstrap, DLQ_TOPIC)
        checks.eq(f"messages in dead-letter topic {DLQ_TOPIC}", len(invalid), len(dlq))
        got = sorted((h.get("assay-invalid-reason", b"").decode(), v) for _, v, h in dlq)
        want = sorted((r, m) for r, m in invalid.items())
        checks.true(f"dead-letter topic holds the {len(invalid)} invalid messages byte for byte, with "
                    "their reason header", got == want,
                    f"reasons {[r for r, _ in got]}, sizes {[len(v) for _, v in got]}")

        summary = (f"{len(events)} valid + {len(invalid)} invalid + 1 unsampled garbage = "
                   f"{n_messages} messages; {n_exp} sampled and judged; assayd ran "
                   f"{run_s:.1f} s; total {time.monotonic() - t_start:.1f} s")
        finished = True
        return summary
    finally:
        stop_process(assayd, "assayd")
        stop_process(broker, "mock broker", term_timeout=10)
        if (not finished or checks.failed()) and os.path.exists(assayd_log):
            print("---- assayd log (tail) ----\n" + tail(assayd_log) + "\n----", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assayd", required=True)
    ap.add_argument("--mock-broker", required=True)
    ap.add_argument("--data", required=True, help="rag_events_dev.jsonl")
    ap.add_argument("--keep-temp", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    for tool in ("kcat", "promtool"):
        if not shutil.which(tool):
            print(f"test_pipeline: '{tool}' not found: run scripts/setup", file=sys.stderr)
            return 1

    return run_script("test_pipeline", run, args)


if __name__ == "__main__":
    sys.exit(main())
