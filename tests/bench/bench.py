#!/usr/bin/python3
"""scripts/bench's driver: assay measured against the limit and against what a user would run
instead, in one run so that the shared machine's noise falls on every side alike. Prints one
Markdown report and writes it to docs/BENCHMARKS.md (with the date and the machine). Asserts
nothing: a target missed is printed as "miss". The five parts (the report repeats, above each
table, how it was measured):

  1. hot path against the limit: N keyed dev-size events produced into a Kafka broker process
     (librdkafka's mock cluster, tests/tools/mock_broker.cpp), consumed three ways in turn,
     A B C A B C: kcat -C -e (the client library's ceiling), assayd (timed from its partition
     assignment to its last message), and the Python consumer below (python3-confluent-kafka,
     json.loads, the same XXH3 sampling, the same three cheap judges in Python); at rates 0.05
     and 1.0;
  2. our own cost per event: callgrind instructions per unsampled and per sampled event, split
     into assay's code, librdkafka and the C/C++ runtime (two runs of different lengths,
     differenced, so that start-up cancels); Google Benchmark of the sampler, the parser and
     every cheap judge on the dev events against the Python counterparts on the same events;
  3. LLM dispatch: tests/bench/llm_dispatch_bench.cpp (1, 64, 1,024 calls in flight against the
     fake provider answering after 200 ms, kept in flight and in bursts);
  4. memory: assayd with its default configuration over a long run (events produced while it
     consumes), resident set sampled, the slope after warm-up;
  5. scale-out: 1, 2, 3 assayd in one consumer group on a 12-partition topic; the time a joining
     instance takes to get partitions and a leaving one to hand them over.

  usage: bench.py [--parts 1,2,3,4,5] [--events N] [--rounds N] [--long-events N]
                  [--scale-events N] [--cg N N N N] [--output FILE|-]
  also:  bench.py python-consumer BOOTSTRAP TOPIC RATE EXPECTED MAX_SECONDS   (part 1's C)
         bench.py python-judges DATA                                          (part 2's Python)
"""

import argparse
import collections
import datetime
import json
import os
import platform
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")
ASSAYD = os.path.join(BUILD, "daemon", "assayd")
MOCK_BROKER = os.path.join(BUILD, "tests", "assay_mock_broker")
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "rag_events_dev.jsonl"))
CHEAP_JUDGES = ["rouge_l", "bleu", "token_f1"]  # each has a Python counterpart below


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# ---- the Python side: what a user would write instead --------------------------------------

WORD = re.compile(r"\w+")


def tokens(text):
    return WORD.findall(text.lower())


def py_rouge_l(ref, hyp):
    """ROUGE-L F1 (Lin 2004) by the textbook O(n*m) LCS table, pure Python."""
    if not ref or not hyp:
        return 0.0
    prev = [0] * (len(hyp) + 1)
    for r in ref:
        cur = [0]
        for j, h in enumerate(hyp):
            cur.append(prev[j] + 1 if r == h else max(prev[j + 1], cur[j]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(hyp), lcs / len(ref)
    return 2 * p * r / (p + r)


def py_token_f1(ref, hyp):
    """SQuAD token F1: multiset overlap."""
    common = sum((collections.Counter(ref) & collections.Counter(hyp)).values())
    if common == 0:
        return 0.0
    p, r = common / len(hyp), common / len(ref)
    return 2 * p * r / (p + r)


def py_context_overlap(contexts, hyp):
    """Share of the answer's distinct tokens found in the contexts."""
    if not hyp:
        return 0.0
    ctx = set()
    for c in contexts:
        ctx.update(tokens(c.get("text", "")))
    a = set(hyp)
    return len(a & ctx) / len(a)


def make_bleu():
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    smooth = SmoothingFunction().method1

    def bleu(ref, hyp):
        return sentence_bleu([ref], hyp, smoothing_function=smooth) if hyp and ref else 0.0
    return bleu


def py_judge_event(event, bleu):
    """The three cheap judges of part 1 on one parsed event (no reference: skipped, as assay's)."""
    ref = event.get("reference")
    if not ref:
        return None
    r, h = tokens(ref), tokens(event.get("answer", ""))
    return (py_rouge_l(r, h), bleu(r, h), py_token_f1(r, h))


def python_consumer(bootstrap, topic, rate, expected, max_seconds):
    """Part 1's C: consume `topic` in a new consumer group, sample by XXH3_64 of the key (as
    assayd: docs/configuration.md, "Sampling"), json.loads and judge the sampled events. Prints
    {"consumed", "sampled", "seconds"} with seconds from the assignment to the last message."""
    import xxhash
    from confluent_kafka import Consumer
    bleu = make_bleu()
    threshold = 2 ** 64 if rate >= 1 else int(rate * 2 ** 64)
    assigned = []

    def on_assign(consumer, partitions):
        if partitions and not assigned:
            assigned.append(time.monotonic())
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"py-{os.getpid()}-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": True})
    c.subscribe([topic], on_assign=on_assign)
    consumed = sampled = 0
    last = None
    start = time.monotonic()
    while consumed < expected:
        msgs = c.consume(num_messages=1000, timeout=0.5)
        now = time.monotonic()
        if not msgs:
            if assigned and last and now - last > 5:
                break
            if now - start > 60:
                break
            continue
        for m in msgs:
            if m.error():
                continue
            consumed += 1
            key = m.key() or b""
            if xxhash.xxh3_64_intdigest(key) < threshold:
                sampled += 1
                py_judge_event(json.loads(m.value()), bleu)
        last = time.monotonic()
        if assigned and last - assigned[0] > max_seconds:
            break
    c.close()
    seconds = (last - assigned[0]) if (last and assigned) else 0.0
    print(json.dumps({"consumed": consumed, "sampled": sampled, "seconds": seconds}))


def python_judges(data):
    """Part 2's Python: each judge over every dev event, nanoseconds per event (median of 3)."""
    events = [json.loads(line) for line in open(data) if line.strip()]
    bleu = make_bleu()
    judges = {
        "rouge_l": lambda e: py_rouge_l(tokens(e["reference"]), tokens(e["answer"])),
        "bleu": lambda e: bleu(tokens(e["reference"]), tokens(e["answer"])),
        "token_f1": lambda e: py_token_f1(tokens(e["reference"]), tokens(e["answer"])),
        "context_overlap": lambda e: py_context_overlap(e.get("contexts", []),
                                                        tokens(e["answer"])),
    }
    needs_ref = {"rouge_l", "bleu", "token_f1"}
    import xxhash
    out = {}
    for name, fn in judges.items():
        runs = []
        for _ in range(3):
            t = time.perf_counter_ns()
            for e in events:
                if name in needs_ref and not e.get("reference"):
                    continue  # skipped, as assay's lexical judges without a reference
                fn(e)
            runs.append((time.perf_counter_ns() - t) / len(events))
        out[name] = statistics.median(runs)
    raw = [line for line in open(data, "rb") if line.strip()]
    for name, fn in {"parse": json.loads,
                     "sample_hash": lambda l: xxhash.xxh3_64_intdigest(l[:40])}.items():
        runs = []
        for _ in range(3):
            t = time.perf_counter_ns()
            for line in raw:
                fn(line)
            runs.append((time.perf_counter_ns() - t) / len(raw))
        out[name] = statistics.median(runs)
    print(json.dumps(out))


# ---- processes --------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """The mock cluster in its own process; topics as NAME:PARTITIONS."""

    def __init__(self, workdir, topics):
        err = open(os.path.join(workdir, "mock_broker.log"), "ab")
        self.proc = subprocess.Popen([MOCK_BROKER, *topics], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        err.close()
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        self.bootstrap = self.proc.stdout.readline().decode().strip() if ready else ""
        if not re.fullmatch(r"127\.0\.0\.1:\d+", self.bootstrap):
            raise SystemExit(f"bench: the mock broker did not start (got {self.bootstrap!r})")
        self.pid = self.proc.pid

    def cpu_seconds(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def dev_lines():
    lines = [line.rstrip("\n") for line in open(DATA) if line.strip()]
    out = []
    for line in lines:
        event_id = json.loads(line)["id"]
        marker = json.dumps(event_id)
        at = line.index(marker)
        out.append((event_id, line[:at + len(marker) - 1], line[at + len(marker) - 1:]))
    return out


def produce(bootstrap, topic, n, start=0, per_second=None):
    """n keyed events (the dev events, ids made unique with #copy) into topic; seconds taken."""
    from confluent_kafka import Producer
    base = dev_lines()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 500000,
                  "queue.buffering.max.kbytes": 1048576, "acks": 1})
    t0 = time.monotonic()
    for i in range(start, start + n):
        event_id, head, tail = base[i % len(base)]
        key = f"{event_id}#{i // len(base)}"
        value = f"{head}#{i // len(base)}{tail}"
        while True:
            try:
                p.produce(topic, key=key.encode(), value=value.encode())
                break
            except BufferError:
                p.poll(0.05)
        if per_second and (i - start) % 1000 == 999:
            ahead = (i - start + 1) / per_second - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise SystemExit(f"bench: {left} message(s) not delivered to {topic}")
    return time.monotonic() - t0


def run_timed(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=None):
    """Runs args; returns (wall seconds, cpu seconds, peak RSS KiB, stderr text)."""
    # Peak RSS is the child's own high-water mark (VmHWM, per address space, so it starts
    # again at exec) polled until it exits: wait4's ru_maxrss would also count this process's
    # resident set at the fork (the producer's queue made it 306 MiB for every child).
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=stdout, stderr=stderr, env=env)
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(proc.pid, "VmHWM") or 0)
            done.wait(0.02)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    err = proc.stderr.read().decode(errors="replace") if stderr == subprocess.PIPE else ""
    _, status, ru = os.wait4(proc.pid, 0)
    done.set()
    watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench: {args[0]} exited {proc.returncode}:\n{err[-3000:]}")
    return wall, ru.ru_utime + ru.ru_stime, peak[0], err


def assayd_config(path, bootstrap, topic, group, rate, workdir, judges=CHEAP_JUDGES,
                  port=0, properties=None, extra=""):
    lines = ["kafka:", f"  brokers: \"{bootstrap}\"", f"  topic: {topic}",
             f"  group_id: {group}"]
    if properties:
        lines.append("  properties:")
        lines += [f"    {k}: \"{v}\"" for k, v in properties.items()]
    lines += [f"sampling: {{rate: {rate}}}", "limits: {workers: 2}", "judges:"]
    lines += [f"  - {{name: {j}, kind: lexical, metric: {j}}}" for j in judges]
    lines += [f"admin: {{listen: \"127.0.0.1:{port}\"}}",
              f"sinks: {{jsonl: {{path: {os.path.join(workdir, group + '.jsonl')}}}}}",
              "log: {level: info}", extra]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def parse_assayd_log(text):
    out = {}
    m = re.search(r"consumption: (\d+) messages in ([\d.]+) s", text)
    if m:
        out["consumed"], out["seconds"] = int(m.group(1)), float(m.group(2))
    m = re.search(r"stopped: consumed (\d+), sampled (\d+), invalid (\d+).*judged (\d+), "
                  r"dropped (\d+)", text)
    if m:
        out.update(stopped_consumed=int(m.group(1)), sampled=int(m.group(2)),
                   judged=int(m.group(4)), dropped=int(m.group(5)))
    return out


# ---- part 1 -------------------------------------------------------------------------------

PREFETCH_KBYTES = (16384, 32768)


def part_hot_path(workdir, n, rounds):
    log(f"part 1: {n} events into a 128-partition topic")
    broker = Broker(workdir, ["hot:128"])
    try:
        produced_s = produce(broker.bootstrap, "hot", n)
        log(f"  produced in {produced_s:.1f} s")
        results = collections.defaultdict(list)
        runs = 0

        def kcat():
            wall, cpu, rss, _ = run_timed(["kcat", "-C", "-b", broker.bootstrap, "-t", "hot",
                                           "-e", "-q", "-o", "beginning"])
            return {"rate": n / wall, "cpu_us": cpu / n * 1e6, "rss_mib": rss / 1024}

        def assayd(rate, properties=None):
            nonlocal runs
            runs += 1
            cfg = assayd_config(os.path.join(workdir, f"hot{runs}.yaml"), broker.bootstrap,
                                "hot", f"assayd-hot-{runs}", rate, workdir,
                                properties=properties)
            wall, cpu, rss, err = run_timed([ASSAYD, "--config", cfg, "--exit-when-idle", "1"])
            r = parse_assayd_log(err)
            if r.get("consumed") != n:
                log(f"  assayd consumed {r.get('consumed')} of {n}")
            return {"rate": r["consumed"] / r["seconds"], "cpu_us": cpu / n * 1e6,
                    "rss_mib": rss / 1024, "dropped": r.get("dropped", 0),
                    "judged": r.get("judged", 0)}

        def python_run(rate, max_seconds):
            proc = subprocess.run([sys.executable, __file__, "python-consumer", broker.bootstrap,
                                   "hot", str(rate), str(n), str(max_seconds)],
                                  capture_output=True, text=True, timeout=max_seconds + 120)
            if proc.returncode != 0:
                raise SystemExit(f"bench: the Python consumer failed:\n{proc.stderr[-2000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            return {"rate": r["consumed"] / r["seconds"], "consumed": r["consumed"]}

        for _ in range(rounds):
            results["kcat"].append(kcat())
            results["assayd_0.05"].append(assayd(0.05))
            results["python_0.05"].append(python_run(0.05, 60))
        for _ in range(max(1, rounds - 1)):
            results["assayd_1.0"].append(assayd(1.0))
            results["python_1.0"].append(python_run(1.0, 20))
        for kbytes in PREFETCH_KBYTES:  # librdkafka's pre-fetch queue below its 64 MB default
            results[f"prefetch_{kbytes}"].append(
                assayd(0.05, {"queued.max.messages.kbytes": str(kbytes)}))
        for k, v in results.items():
            log(f"  {k}: " + ", ".join(f"{x['rate']:.0f}/s" for x in v))
        return results
    finally:
        broker.stop()


# ---- part 2 -------------------------------------------------------------------------------

OURS = ("assayd", "libxxhash", "libyaml-cpp", "libprometheus", "libspdlog", "libfmt", "libre2",
        "libicu", "libhiredis", "libsystemd")
RDKAFKA = ("librdkafka", "libssl", "libcrypto", "libz.", "libzstd", "liblz4", "libsasl2",
           "libcurl")


def object_class(path):
    base = os.path.basename(path)
    if base.startswith(OURS):
        return "assay"
    if base.startswith(RDKAFKA):
        return "librdkafka"
    return "runtime"


def callgrind_split(path):
    """Instructions (Ir) of a callgrind profile by class of object: 'assay', 'librdkafka' and
    'runtime' (libc, libstdc++, ld.so: called by both). Calls from assay or librdkafka into the
    runtime are charged to the caller (their inclusive cost), so the runtime's part is what
    neither called directly (its own threads, start-up)."""
    names = {}
    totals = collections.Counter()
    ob = cob = None
    expect_call_cost = False
    call_target_class = None

    def name(spec):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?", spec)
        if not m:
            return spec
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "?")
    with open(path) as f:
        for line in f:
            if expect_call_cost:
                expect_call_cost = False
                parts = line.split()
                caller = object_class(ob or "")
                if call_target_class == "runtime" and caller != "runtime" and len(parts) >= 2:
                    cost = int(parts[-1])
                    totals[caller] += cost
                    totals["runtime_called"] += cost
                continue
            if line.startswith("ob="):
                ob = name(line[3:].strip())
            elif line.startswith("cob="):
                cob = name(line[4:].strip())
            elif line.startswith("calls="):
                call_target_class = object_class(cob if cob is not None else (ob or ""))
                cob = None
                expect_call_cost = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) >= 2:
                    totals["self_" + object_class(ob or "")] += int(parts[-1])
    runtime = totals["self_runtime"] - totals["runtime_called"]
    return {"assay": totals["self_assay"] + totals["assay"],
            "librdkafka": totals["self_librdkafka"] + totals["librdkafka"],
            "runtime": max(0, runtime)}


def part_callgrind(workdir, small, large, sampled_small, sampled_large):
    log("part 2: callgrind")
    broker = Broker(workdir, ["cg1:16", "cg2:16", "cg3:16", "cg4:16"])
    try:
        for topic, count in (("cg1", small), ("cg2", large), ("cg3", sampled_small),
                             ("cg4", sampled_large)):
            produce(broker.bootstrap, topic, count)
        out = {}
        for kind, rate, (t1, n1), (t2, n2) in (
                ("unsampled", 0.0, ("cg1", small), ("cg2", large)),
                ("sampled", 1.0, ("cg3", sampled_small), ("cg4", sampled_large))):
            splits = []
            for topic, count in ((t1, n1), (t2, n2)):
                cfg = assayd_config(os.path.join(workdir, f"{topic}.yaml"), broker.bootstrap,
                                    topic, f"cg-{topic}", rate, workdir)
                prof = os.path.join(workdir, f"callgrind.{topic}")
                run_timed(["valgrind", "--tool=callgrind", f"--callgrind-out-file={prof}",
                           ASSAYD, "--config", cfg, "--exit-when-idle", "2"])
                splits.append(callgrind_split(prof))
            out[kind] = {k: max(0.0, (splits[1][k] - splits[0][k]) / (n2 - n1))
                         for k in splits[0]}
            log(f"  per {kind} event: " + ", ".join(f"{k} {v:.0f}" for k, v in out[kind].items()))
        return out
    finally:
        broker.stop()


def part_micro(workdir):
    log("part 2: Google Benchmark and the Python counterparts")
    bench = os.path.join(BUILD, "tests", "assay_bench")
    proc = subprocess.run([bench, "--benchmark_format=json", "--benchmark_min_time=0.2",
                           "--benchmark_filter=BM_SampleHash|BM_Parse|BM_Judge/|"
                           "BM_AllJudgesPerEvent|BM_Ingest"],
                          capture_output=True, text=True, check=True)
    ours = {}
    for b in json.loads(proc.stdout)["benchmarks"]:
        name = b["name"]
        ns = b["cpu_time"] if b.get("time_unit") == "ns" else b["cpu_time"] * \
            {"us": 1e3, "ms": 1e6}[b["time_unit"]]
        if name.startswith("BM_Judge/"):
            ours[b.get("label", name)] = ns
        elif name == "BM_SampleHash":
            ours["sample_hash"] = ns
        elif name == "BM_ParseEvent/0":
            ours["parse"] = ns
        elif name == "BM_ParseEvent/1":
            ours["parse, RapidJSON alone"] = ns
        elif name.startswith("BM_ParseHostile/"):
            ours["parse hostile corpus, " + b.get("label", name)] = ns
        elif name.startswith("BM_Ingest") and b.get("items_per_second"):
            ours["ingest " + name[len("BM_Ingest"):]] = 1e9 / b["items_per_second"]
        elif name == "BM_AllJudgesPerEvent":
            ours["all_local_judges"] = ns
    proc = subprocess.run([sys.executable, __file__, "python-judges", DATA], capture_output=True,
                          text=True, check=True)
    return ours, json.loads(proc.stdout)


# ---- part 3 -------------------------------------------------------------------------------

def part_dispatch():
    log("part 3: LLM dispatch")
    proc = subprocess.run([os.path.join(BUILD, "tests", "assay_llm_dispatch_bench")],
                          capture_output=True, text=True, check=True, timeout=300)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


# ---- part 4 -------------------------------------------------------------------------------

def rss_kib(pid, field="VmRSS"):
    """The process's resident set (VmRSS) or its high-water mark (VmHWM), KiB; None if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def metric_value(port, name):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return None
    total = None
    for line in text.decode().splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            total = (total or 0) + float(line.rsplit(" ", 1)[1])
    return total


# Events/s produced during part 4: below what assayd consumes at rate 0.05 even on a busy
# machine, so that the mock broker (about 5 MB kept per partition) never deletes unread data.
JOIN_CAPACITY = 100_000  # tracking.join_capacity default (docs/configuration.md)
MEMORY_PRODUCE_RATE = 25000


def part_memory(workdir, n, properties=None, label="default"):
    log(f"part 4: memory, {n} events produced while assayd consumes ({label})")
    broker = Broker(workdir, ["mem:128"])
    port = free_port()
    try:
        cfg = assayd_config(os.path.join(workdir, f"mem-{label}.yaml"), broker.bootstrap, "mem",
                            f"assayd-mem-{label}", 0.05, workdir, port=port,
                            properties=properties)
        err = open(os.path.join(workdir, f"mem-{label}.log"), "wb")
        proc = subprocess.Popen([ASSAYD, "--config", cfg], stderr=err, stdout=subprocess.DEVNULL)
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                r = rss_kib(proc.pid)
                c = metric_value(port, "assay_events_consumed_total")
                if r is not None and c is not None:
                    samples.append((time.monotonic(), c, r / 1024))
                stop.wait(0.25)
        t = threading.Thread(target=sample)
        t.start()
        t0 = time.monotonic()
        produce(broker.bootstrap, "mem", n, per_second=MEMORY_PRODUCE_RATE)
        last, last_change = -1, time.monotonic()
        while time.monotonic() - t0 < 600:  # all consumed, or 5 s without progress
            c = metric_value(port, "assay_events_consumed_total") or 0
            if c >= n:
                break
            if c != last:
                last, last_change = c, time.monotonic()
            elif time.monotonic() - last_change > 5:
                log(f"  consumption stopped at {c:,.0f} of {n:,} (the mock broker keeps about "
                    "5 MB a partition: what the producer ran ahead by more was deleted)")
                break
            time.sleep(0.25)
        elapsed = time.monotonic() - t0
        stop.set()
        t.join()
        peak = 0
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        err.close()
        consumed = samples[-1][1] if samples else 0
        # Warm-up ends when the last bounded structure that grows with the sampled events is
        # full: the score tracker's join map (tracking.join_capacity sampled events, 100,000 by
        # default, about 250 bytes each) fills after join_capacity / rate events.
        warm_at = max(0.2 * n, JOIN_CAPACITY / 0.05)
        if warm_at >= 0.9 * n:
            warm_at = 0.2 * n
        warm = [s for s in samples if s[1] >= warm_at]
        filling = [s for s in samples if 0.05 * n <= s[1] < warm_at]

        def slope_of(points):
            if len(points) < 3:
                return 0.0
            xs = [p[1] / 1e6 for p in points]
            ys = [p[2] for p in points]
            mx, my = statistics.fmean(xs), statistics.fmean(ys)
            den = sum((x - mx) ** 2 for x in xs)
            return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0
        slope = slope_of(warm)
        steady = statistics.median(s[2] for s in warm) if warm else 0
        r = {"events": consumed, "seconds": elapsed, "peak_mib": peak, "steady_mib": steady,
             "slope_mib_per_million": slope, "rate": consumed / elapsed if elapsed else 0,
             "warm_at": warm_at, "filling_slope": slope_of(filling)}
        log(f"  {r}")
        return r
    finally:
        broker.stop()


# ---- part 5 -------------------------------------------------------------------------------

# The mock coordinator completes a rebalance only once the session timeout of a member that
# left (or of the first, member-id-less JoinGroup of one that joins) expires: with Kafka's
# default 45 s every join and leave takes about 44 s there. The crash tests lower it likewise.
SCALE_PROPERTIES = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}

class Daemon:
    """An assayd whose log lines are read (and time-stamped) as they come."""

    def __init__(self, cfg, port):
        self.port = port
        self.started = time.monotonic()
        self.proc = subprocess.Popen([ASSAYD, "--config", cfg], stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL)
        self.lines = []
        self.assigned = None  # partitions held after the last rebalance
        self.first_assigned_at = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stderr:
            now = time.monotonic()
            line = raw.decode(errors="replace")
            self.lines.append((now, line))
            m = re.search(r"kafka: assigned (\d+) partition", line)
            if m:
                self.assigned = int(m.group(1))
                if self.assigned and self.first_assigned_at is None:
                    self.first_assigned_at = now
            elif re.search(r"kafka: \d+ partition\(s\) revoked", line):
                self.assigned = 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def wait_until(predicate, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return time.monotonic()
        time.sleep(0.02)
    return None


def part_scale(workdir, per_round):
    log("part 5: scale-out on 12 partitions")
    broker = Broker(workdir, ["so1:12", "so2:12", "so3:12"])
    out = {"rates": {}, "join_s": [], "leave_s": []}
    try:
        for k in (1, 2, 3):
            topic = f"so{k}"
            daemons = []
            for i in range(k):
                port = free_port()
                cfg = assayd_config(os.path.join(workdir, f"so{k}-{i}.yaml"), broker.bootstrap,
                                    topic, f"scale-{k}", 1.0, workdir, port=port,
                                    properties=SCALE_PROPERTIES)
                with open(cfg) as f:  # each its own judgments file
                    text = f.read().replace(f"scale-{k}.jsonl", f"scale-{k}-{i}.jsonl")
                with open(cfg, "w") as f:
                    f.write(text)
                d = Daemon(cfg, port)
                daemons.append(d)
                if i > 0:  # a joining instance: until it holds partitions and the group is whole
                    got = wait_until(lambda: d.first_assigned_at is not None, 60)
                    whole = wait_until(lambda: sum(x.assigned or 0 for x in daemons) == 12, 60)
                    if got and whole:
                        out["join_s"].append((i + 1, k, got - d.started, whole - d.started))
            wait_until(lambda: sum(x.assigned or 0 for x in daemons) == 12 and
                       all(x.assigned for x in daemons), 60)
            time.sleep(1)  # the group settled
            t0 = time.monotonic()
            produce(broker.bootstrap, topic, per_round)

            def judged():
                return sum(metric_value(d.port, "assay_events_judged_total") or 0
                           for d in daemons)
            done = wait_until(lambda: judged() >= per_round, 300)
            out["rates"][k] = per_round / ((done or time.monotonic()) - t0)
            log(f"  {k} instance(s): {out['rates'][k]:.0f} events/s")
            if k == 3:  # a leaving instance: from SIGTERM until the others hold all 12
                leaving = daemons.pop()
                t_sig = time.monotonic()
                leaving.stop()
                whole = wait_until(lambda: sum(x.assigned or 0 for x in daemons) == 12, 60)
                if whole:
                    out["leave_s"].append(whole - t_sig)
            for d in daemons:
                d.stop()
        return out
    finally:
        broker.stop()


# ---- the report ---------------------------------------------------------------------------

def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return f"{os.cpu_count()} × {model}, {mem:.0f} GiB, Linux {platform.release()}"


def med(values):
    return statistics.median(values) if values else float("nan")


def verdict(ok):
    return "pass" if ok else "**miss**"


def report(args, hot, cg, micro, dispatch, memory, scale, elapsed):
    rows = []  # (target, measured, pass)
    lines = []
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines.append(f"Run {now} on {machine()}; `scripts/bench` took {elapsed / 60:.1f} min.")
    lines.append("")
    if hot:
        kcat = med([x["rate"] for x in hot["kcat"]])
        a05 = med([x["rate"] for x in hot["assayd_0.05"]])
        p05 = med([x["rate"] for x in hot["python_0.05"]])
        a10 = med([x["rate"] for x in hot["assayd_1.0"]])
        p10 = med([x["rate"] for x in hot["python_1.0"]])
        pairs = [a["rate"] / k["rate"] for a, k in zip(hot["assayd_0.05"], hot["kcat"])]
        rows.append(("assayd ≥ 0.95 × kcat events/s at rate 0.05",
                     f"{med(pairs):.2f} (pairs: {', '.join(f'{p:.2f}' for p in pairs)})",
                     med(pairs) >= 0.95))
        rows.append(("assayd ≥ 40 × the Python consumer at rate 1.0, three cheap judges, "
                     "nothing shed", f"{a10 / p10:.1f} × ({a10:,.0f} events/s, dropped "
                     f"{sum(x.get('dropped', 0) for x in hot['assayd_1.0'])})",
                     a10 / p10 >= 40 and all(x.get("dropped", 0) == 0
                                             for x in hot["assayd_1.0"])))
    if cg:
        ours = cg["unsampled"]["assay"]
        rows.append(("≤ 2,000 instructions of our code per unsampled event", f"{ours:,.0f}",
                     ours <= 2000))
    if micro:
        ours, py = micro
        worst, slowest = None, ""
        for j in ("rouge_l", "bleu", "token_f1", "context_overlap"):
            if j in ours and j in py:
                ratio = py[j] / ours[j]
                if worst is None or ratio < worst:
                    worst, slowest = ratio, j
        if "parse" in ours:
            rows.append(("parse ≤ 2.5 µs per dev event, every check kept",
                         f"{ours['parse'] / 1000:.2f} µs (RapidJSON alone "
                         f"{ours.get('parse, RapidJSON alone', 0) / 1000:.2f} µs)",
                         ours["parse"] <= 2500))
        if worst is not None:
            rows.append(("every cheap judge ≥ 50 × its Python counterpart",
                         f"slowest ratio {worst:.0f} × ({slowest})", worst >= 50))
    if dispatch:
        d = next((x for x in dispatch if x["in_flight"] == 1024), None)
        if d:
            rows.append(("1,024 calls in flight: p99 added latency ≤ 5 ms",
                         f"{d['added_p99_ms']:.2f} ms (a burst of 1,024 at once: "
                         f"{d['burst_p99_ms']:.0f} ms to drain)", d["added_p99_ms"] <= 5))
            rows.append(("1,024 calls in flight: ≤ 60 µs of our CPU per call",
                         f"{d['client_cpu_us']:.0f} µs", d["client_cpu_us"] <= 60))
        d64 = next((x for x in dispatch if x["in_flight"] == 64), None)
        if d64:
            rows.append(("64 calls in flight: p99 added latency ≤ 1 ms",
                         f"{d64['added_p99_ms']:.2f} ms", d64["added_p99_ms"] <= 1))
        if d:
            rows.append(("1,024 calls in flight: ≤ 64 KiB per call",
                         f"{d['rss_per_call_kib']:.1f} KiB", d["rss_per_call_kib"] <= 64))
        if d64 and "allocations_on_request_path" in d64:
            # The caller's thread inside LlmJudge::call (the client thread's write is not
            # counted: docs/ARCHITECTURE.md); the request body's buffer is the pooled call's.
            rows.append(("no allocation per call on the request path beyond the request body "
                         "(64 in flight)",
                         f"{d64['allocations_on_request_path']:.2f} a call (the body's buffer "
                         "reused too)", d64["allocations_on_request_path"] < 0.5))
    if memory:
        m = memory
        rows.append((f"steady RSS ≤ 64 MiB at {args.long_events:,} events, default configuration",
                     f"{m['steady_mib']:.1f} MiB (peak {m['peak_mib']:.1f})",
                     m["steady_mib"] <= 64))
        rows.append(("no RSS growth after warm-up",
                     f"{m['slope_mib_per_million']:+.2f} MiB per million events",
                     abs(m["slope_mib_per_million"]) < 1.0))
    lines += ["| target | measured | |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {verdict(ok)} |" for t, v, ok in rows]
    lines.append("")
    if hot:
        lines += ["### 1. Hot path against the limit", "",
                  f"{args.events:,} keyed dev-size events (the dev events, ids made unique; "
                  "about 3 KB each) in a 128-partition topic of a broker process (librdkafka's "
                  "mock cluster). events/s: kcat and Python from the whole process (kcat) or "
                  "from the assignment (Python); assayd from its partition assignment to its "
                  "last message (its `consumption:` log line). Median of the runs, each run "
                  "listed.", "",
                  "| consumer | rate | events/s (median) | runs | CPU µs/event | peak RSS MiB |",
                  "|---|---|---|---|---|---|"]
        for key, who, rate in (("kcat", "kcat -C -e", "—"), ("assayd_0.05", "assayd", "0.05"),
                               ("python_0.05", "Python", "0.05"), ("assayd_1.0", "assayd", "1.0"),
                               ("python_1.0", "Python", "1.0")):
            v = hot[key]
            cpu = med([x["cpu_us"] for x in v]) if "cpu_us" in v[0] else None
            rss = med([x["rss_mib"] for x in v]) if "rss_mib" in v[0] else None
            lines.append(f"| {who} | {rate} | {med([x['rate'] for x in v]):,.0f} | "
                         + ", ".join(f"{x['rate']:,.0f}" for x in v) + " | "
                         + (f"{cpu:.1f}" if cpu is not None else "") + " | "
                         + (f"{rss:.0f}" if rss is not None else "") + " |")
        lines += ["", f"Ratios: assayd/kcat {a05 / kcat:.2f} at rate 0.05 (median of pairs "
                  f"{med(pairs):.2f}); kcat/Python {kcat / p05:.1f}; assayd/Python {a05 / p05:.1f} "
                  f"at rate 0.05 and {a10 / p10:.1f} at rate 1.0. The Python consumer at rate 1.0 "
                  "stops after 20 s (its rate is what it reached by then). assayd at rate 1.0 "
                  "dropped " + ", ".join(str(x.get("dropped", 0)) for x in hot["assayd_1.0"])
                  + " (limits.when_full: block pauses consumption instead).", "",
                  "librdkafka's pre-fetch queue (`queued.max.messages.kbytes`, 65536 by default, "
                  "kept by assayd) against smaller settings, assayd at rate 0.05 once each (65536: "
                  "the median above; one run of each is noisy on this shared machine): "
                  + "; ".join(f"{k} KB: {hot[f'prefetch_{k}'][0]['rate']:,.0f} events/s, peak "
                              f"RSS {hot[f'prefetch_{k}'][0]['rss_mib']:.0f} MiB"
                              for k in PREFETCH_KBYTES)
                  + f"; 65536 KB: {a05:,.0f} events/s, peak RSS "
                  f"{med([x['rss_mib'] for x in hot['assayd_0.05']]):.0f} MiB.", ""]
    if cg:
        lines += ["### 2. Our own cost per event", "",
                  "callgrind (valgrind --tool=callgrind) instructions per event: two runs of "
                  f"{args.cg[0]:,} and {args.cg[1]:,} events (unsampled: rate 0; sampled: "
                  f"{args.cg[2]:,} and {args.cg[3]:,} events at rate 1.0 with the three cheap "
                  "judges), differenced. assay = our binary and the libraries only our code "
                  "calls (xxHash, yaml-cpp, prometheus-cpp, spdlog, RE2, ICU) plus the C/C++ "
                  "runtime functions our code calls (malloc, memcpy…); librdkafka likewise with "
                  "its own runtime calls; runtime = what neither called directly.", "",
                  "| event | assay | librdkafka | runtime |", "|---|---|---|---|"]
        for kind in ("unsampled", "sampled"):
            c = cg[kind]
            lines.append(f"| {kind} | {c['assay']:,.0f} | {c['librdkafka']:,.0f} | "
                         f"{c['runtime']:,.0f} |")
        lines.append("")
    if micro:
        ours, py = micro
        lines += ["Google Benchmark (tests/bench/pipeline_bench.cpp, CPU ns per event over every "
                  "dev event; a lexical judge on an event without a reference is skipped) against "
                  "the Python counterparts on the same events (this file: nltk's sentence_bleu "
                  "with smoothing method 1, a pure-Python ROUGE-L, token F1, context token "
                  "overlap; json.loads; python3-xxhash).", "",
                  "| step | assay ns/event | Python ns/event | ratio |", "|---|---|---|---|"]
        for j in ("sample_hash", "parse", "rouge_l", "bleu", "token_f1", "context_overlap"):
            if j in ours:
                p = py.get(j)
                lines.append(f"| {j} | {ours[j]:,.0f} | " + (f"{p:,.0f} | {p / ours[j]:.0f} × |"
                                                          if p else "— | — |"))
        others = sorted(k for k in ours if k not in ("sample_hash", "parse", "rouge_l", "bleu",
                                                     "token_f1", "context_overlap"))
        lines.append("")
        lines.append("Other local judges, ns/event: " +
                     ", ".join(f"{k} {ours[k]:,.0f}" for k in others) + ".")
        lines.append("")
    if dispatch:
        lines += ["### 3. LLM dispatch", "",
                  "tests/bench/llm_dispatch_bench.cpp: LlmJudge calls (prompt, budget reservation "
                  "and settlement, request, reply parsing) on one HTTP client thread against the "
                  "fake provider answering after 200 ms. Kept in flight: K calls in flight all "
                  "along (started evenly over 200 ms, then one new call per result, started by "
                  "the bench's driver thread: woken by each result at 1 and 64 in flight, looking "
                  "every millisecond at 1,024: woken by each result instead, its own wake-ups, "
                  "counted as ours, made the same code cost 135-141 µs a call rather than 97-100 "
                  "in two runs each), as a judge fed continuously at max_in_flight K. Burst: waves of K calls sent at once, whose "
                  "K replies come back together; the last waits for the K − 1 before it on the "
                  "client thread, so its p99 is the time to drain a burst, about K × the client "
                  "thread's cost per reply. Added latency = call to result − the time on the wire "
                  "(from the request's last byte written to the reply's last byte read, on the "
                  "client's clock: the fake server's delay and handling and the loopback round "
                  "trip excluded, and so is the time a reply waits for our busy client thread "
                  "before it is read; it varies from run to run with the load on the two cores); memory = resident set growth with K in flight / K (first wave); CPU "
                  "per call = user + system time over the kept-in-flight calls (the ramp's K "
                  "included) / their number, of the bench process (judge and HTTP client threads; "
                  "the memory ledger runs inline on them) and of the fake server, which shares "
                  "the same two cores; at 1 in "
                  "flight (5 calls/s) our figure is mostly the idle threads' timers, and the fake "
                  "server's is below /proc's 10 ms clock tick; allocations per call = operator "
                  "new calls of the bench process over the kept-in-flight calls / their number "
                  "(the C libraries' own mallocs not counted), of which on the request path = "
                  "those of the driver's thread inside LlmJudge::call (prompt, request body, "
                  "reservation with the inline ledger, the hand-off to the client thread). "
                  "failed: of both ways.", "",
                  "| in flight | calls | failed | calls/s | added p50 ms | added p99 ms | "
                  "burst calls/s | burst p50 ms | burst p99 ms | KiB/call | our CPU µs/call | "
                  "fake server CPU µs/call | allocations/call | of which on the request path |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for d in dispatch:
            lines.append(f"| {d['in_flight']:,} | {d['calls']:,} | "
                         f"{d['failed'] + d['burst_failed']} | "
                         f"{d['calls_per_s']:,.0f} | {d['added_p50_ms']:.2f} | "
                         f"{d['added_p99_ms']:.2f} | {d['burst_calls_per_s']:,.0f} | "
                         f"{d['burst_p50_ms']:.2f} | {d['burst_p99_ms']:.2f} | "
                         + (f"{d['rss_per_call_kib']:.1f}" if d["in_flight"] > 1 else "—") +
                         f" | {d['client_cpu_us']:.0f} | {d['server_cpu_us']:.0f} | "
                         f"{d.get('allocations_per_call', 0):.0f} | "
                         f"{d.get('allocations_on_request_path', 0):.1f} |")
        lines.append("")
    if memory:
        m = memory
        lines += ["### 4. Memory", "",
                  f"assayd with its default configuration (rate 0.05, the three cheap judges) on "
                  f"a 128-partition topic while {args.long_events:,} events are produced into it; "
                  "resident set sampled every 0.25 s; warm-up = until the score tracker's join "
                  "map is full (tracking.join_capacity, 100,000 sampled events of about 250 "
                  f"bytes: {m['warm_at']:,.0f} events at rate 0.05); steady = median after it; "
                  "slope = least squares of RSS against events consumed after it (while the "
                  f"join map fills: {m['filling_slope']:+.2f} MiB per million events).", "",
                  "| events consumed | seconds | events/s | peak RSS MiB | steady RSS MiB | "
                  "slope MiB per million events |", "|---|---|---|---|---|---|",
                  f"| {m['events']:,.0f} | {m['seconds']:.1f} | {m['rate']:,.0f} | "
                  f"{m['peak_mib']:.1f} | {m['steady_mib']:.1f} | "
                  f"{m['slope_mib_per_million']:+.2f} |", ""]
    if scale:
        lines += ["### 5. Scale-out", "",
                  f"1, 2 and 3 assayd in one consumer group on a 12-partition topic, rate 1.0, the "
                  f"three cheap judges, 2 workers each; {args.scale_events:,} events produced once "
                  "the group is settled; events/s from the first produced to the last judged "
                  "(`assay_events_judged_total` of every instance). All instances share this "
                  "machine's 2 cores, so more instances cannot add CPU here: the figure shows "
                  "what the group's coordination costs. `session.timeout.ms` 6000 and "
                  "`heartbeat.interval.ms` 1000: librdkafka's mock coordinator ends a rebalance "
                  "only when a session times out (with the default 45 s, every join and leave "
                  "took 44 s there; a production broker was not measured).", "",
                  "| instances | events/s |", "|---|---|"]
        for k, r in scale["rates"].items():
            lines.append(f"| {k} | {r:,.0f} |")
        lines.append("")
        if scale["join_s"]:
            lines.append("Joining instance: " + "; ".join(
                f"instance {i} of {k}: its first partitions {a:.1f} s after its start, the group "
                f"whole after {b:.1f} s" for i, k, a, b in scale["join_s"]) + ".")
        if scale["leave_s"]:
            lines.append("Leaving instance (SIGTERM): the others hold all 12 partitions " +
                         ", ".join(f"{x:.1f} s" for x in scale["leave_s"]) + " later.")
        lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "python-consumer":
        b, t, rate, expected, max_s = sys.argv[2:7]
        return python_consumer(b, t, float(rate), int(expected), float(max_s))
    if len(sys.argv) > 1 and sys.argv[1] == "python-judges":
        return python_judges(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--long-events", type=int, default=3000000)
    ap.add_argument("--scale-events", type=int, default=18000)
    ap.add_argument("--cg", type=int, nargs=4, default=[2000, 12000, 300, 1300],
                    metavar=("UNSAMPLED_SHORT", "UNSAMPLED_LONG", "SAMPLED_SHORT",
                             "SAMPLED_LONG"))
    ap.add_argument("--parts", default="1,2,3,4,5")
    ap.add_argument("--output", default=os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="assay-bench-") as workdir:
        micro = part_micro(workdir) if "2" in parts else None
        dispatch = part_dispatch() if "3" in parts else None
        hot = part_hot_path(workdir, args.events, args.rounds) if "1" in parts else None
        cg = part_callgrind(workdir, *args.cg) if "2" in parts else None
        memory = part_memory(workdir, args.long_events) if "4" in parts else None
        scale = part_scale(workdir, args.scale_events) if "5" in parts else None
        text = report(args, hot, cg, micro, dispatch, memory, scale, time.monotonic() - t0)
    print(text)
    if args.output and args.output != "-":
        with open(args.output, "w") as f:
            f.write("# Benchmarks\n\n"
                    "The last table printed by `scripts/bench` (tests/bench/bench.py says how "
                    "each number is measured). Targets from the benchmarks issue; CI times "
                    "nothing.\n\n" + text + "\n")
        log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
