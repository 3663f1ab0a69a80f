#!/usr/bin/python3
"""kill -9 mid-stream, restart, compare: no verdict lost, no call paid twice (issue 9).

  1. a broker process (tests/tools/mock_broker.cpp); N keyed events (the dev data repeated under
     new ids, each copy's question made unique so that every (event, judge) prompt differs),
     produced with kcat;
  2. a real redis-server holds the budget ledger and the verdict store; the fake provider answers
     every call after --latency-ms and writes its own call log (one line per billed reply);
  3. assayd (context_overlap + an LLM judge, 8 calls in flight) is killed with SIGKILL --kills
     times at random points (the first one while calls are in flight), restarted each time, and
     finally runs until every sampled event is judged (deadline 300 s), then stops on SIGTERM.

Asserts:
  - lost: every sampled event (python3-xxhash, docs/configuration.md "Sampling") has a judgment
    with a context_overlap verdict and an LLM verdict (a score, or no_context for an event
    without contexts): 0 lost;
  - paid twice: a prompt in the provider's call log more than once is allowed only when the run
    that made the first call was killed before the verdict was stored, and the next call came
    from a later run: 0 unexplained. Decided from facts, not from time windows: after each kill
    the test waits until the provider has read and answered every request of the dead process
    (open_connections 0 in /_fake/stats: a request is stamped with the run it came from), then
    reads which prompts have a stored verdict in Redis (the fake provider's justification
    names its prompt);
  - the verdict store holds one verdict per billed prompt, and no lease is left;
  - Redis' settled spend equals the cost of the calls whose verdict stood (within one call per
    kill: a kill between storing a verdict and settling it leaves the reservation to expire);
  - duplicates in the JSON Lines file (events judged again after a kill) are counted and reported,
    and a re-emitted LLM verdict says "stored": true and costs nothing.
The CI schedule is the default (3,000 events, 12 partitions, rate 0.2); the full run of the issue:
  test_kill_restart.py --assayd build/daemon/assayd --mock-broker build/tests/assay_mock_broker \\
      --data ../shared/data/rag_events_dev.jsonl --events 20000 --partitions 24 --rate 0.05
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

TOPIC = "rag.kill"
JUDGE = "faithfulness_llm"
# gpt-4o-mini, USD per million tokens (judges/llm/pricing.cpp's built-in table), at usd_to_eur.
PRICE_IN, PRICE_OUT, USD_TO_EUR = 0.15, 0.60, 0.92


def make_events(path, n):
    """n events: the dev data repeated, copy k under id ID~k with a question ending in [k]."""
    base = []
    with open(path) as f:
        for line in f:
            if line.strip():
                base.append(json.loads(line))
    out = []
    k = 0
    while len(out) < n:
        for ev in base:
            if len(out) == n:
                break
            e = dict(ev, id=f"{ev['id']}~{k}", question=f"{ev['question']} [{k}]")
            out.append((e["id"], json.dumps(e, ensure_ascii=False).encode()))
        k += 1
    return out


def write_config(path, bootstrap, redis_port, fake_port, admin_port, jsonl, rate):
    q = json.dumps
    with open(path, "w") as f:
        f.write(f"""kafka:
  brokers: {q(bootstrap)}
  topic: {TOPIC}
  group_id: kill-test
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 500
    max.poll.interval.ms: 8000
sampling: {{rate: {rate}}}
budget:
  daily_limit_eur: 100
  store: redis://127.0.0.1:{redis_port}/0
judges:
  - {{name: context_overlap, kind: lexical, metric: context_overlap}}
  - name: {JUDGE}
    kind: llm
    criterion: faithfulness
    provider: openai
    endpoint: http://127.0.0.1:{fake_port}/v1
    model: gpt-4o-mini
    api_key_env: ASSAY_TEST_LLM_KEY
    max_in_flight: 8
    timeout_ms: 2000
    max_retries: 0
    max_retry_wait_ms: 1000
admin: {{listen: "127.0.0.1:{admin_port}"}}
sinks: {{jsonl: {{path: {q(jsonl)}}}}}
""")


def fake_stats(port):
    status, body = tp.http_get(f"http://127.0.0.1:{port}/_fake/stats")
    return json.loads(body)["requests"] if status == 200 else -1


def read_call_log(path):
    """[(prompt hash, received s, replied s, cost EUR)] from the fake provider's call log."""
    calls = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                h, t0, t1, tin, tout = line.split()
                cost = (int(tin) * PRICE_IN + int(tout) * PRICE_OUT) / 1e6 * USD_TO_EUR
                calls.append((h, int(t0) / 1000, int(t1) / 1000, cost))
    return calls


def redis_cmd(port, *words):
    return subprocess.run(["redis-cli", "-p", str(port), *words], capture_output=True,
                          text=True, timeout=30).stdout


def open_connections(port):
    status, body = tp.http_get(f"http://127.0.0.1:{port}/_fake/stats")
    return json.loads(body)["open_connections"] if status == 200 else -1


def redis_values(port, pattern):
    """[value] of every key matching `pattern`, read in one redis-cli session (raw replies, a
    line each: the values are one-line JSON, money counts and leases)."""
    keys = redis_cmd(port, "--scan", "--pattern", pattern).split()
    out = subprocess.run(["redis-cli", "-p", str(port)], capture_output=True, text=True,
                         timeout=60, input="".join(f"GET {json.dumps(k)}\n" for k in keys)).stdout
    return out.splitlines()[:len(keys)]


def stored_prompts(port):
    """The prompts (FNV-1a, hex) whose verdict is in the verdict store."""
    values = redis_values(port, f"assay:*:verdict:{JUDGE}:*")
    return {m for v in values for m in re.findall(r"Fake verdict of prompt ([0-9a-f]{16})", v)}


def run(args, workdir, checks):
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    tp.log(f"seed {seed}: {args.events} events, {args.partitions} partitions, rate {args.rate}, "
           f"{args.kills} kills, provider latency {args.latency_ms} ms")
    events = make_events(args.data, args.events)
    expected = {eid for eid, _ in events if tp.sampled(eid, args.rate)}
    with_contexts = {e for e, raw in events if e in expected and json.loads(raw).get("contexts")}
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir, [f"{TOPIC}:{args.partitions}"])
        procs.append((broker, "broker"))
        redis, redis_port = tp.start_redis(workdir)
        procs.append((redis, "redis"))
        call_log = os.path.join(workdir, "calls.log")
        fake, fake_port = tp.start_fake_provider(args.assayd, "--delay-ms", str(args.latency_ms),
                                                 "--call-log", call_log)
        procs.append((fake, "fake provider"))
        tp.produce_keyed(bootstrap, TOPIC, events)
        admin = tp.free_loopback_port()
        cfg, jsonl = os.path.join(workdir, "c.yaml"), os.path.join(workdir, "judgments.jsonl")
        write_config(cfg, bootstrap, redis_port, fake_port, admin, jsonl, args.rate)
        env = dict(os.environ, ASSAY_TEST_LLM_KEY="sk-test")
        log_path = os.path.join(workdir, "assayd.log")

        def start(*extra):
            with open(log_path, "ab") as log:
                p = subprocess.Popen([args.assayd, "--config", cfg, *extra], stdout=log,
                                     stderr=log, env=env, start_new_session=True)
            procs.append((p, "assayd"))
            return p

        llm_expected = len(with_contexts)
        # Per kill: when every request of the killed run had been read (later ones come from
        # later runs), and the prompts whose verdict the store held then.
        barriers, stored_at_kill, in_flight_at_kill = [], [], []
        for k in range(args.kills):
            daemon = start()
            done = len(read_call_log(call_log))
            # Kill points spread over the calls still to make; the first kill waits for calls
            # in flight, the others fall where they fall.
            target = done + max(1, int((llm_expected - done) * rng.uniform(0.15, 0.45)))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and daemon.poll() is None:
                made = len(read_call_log(call_log))
                running = fake_stats(fake_port) - made
                if made >= target and (k > 0 or running > 0):
                    break
                time.sleep(0.02)
            if daemon.poll() is not None:
                raise tp.TestFailure(f"assayd exited by itself (code {daemon.returncode}) before kill {k + 1}")
            running = fake_stats(fake_port) - len(read_call_log(call_log))
            tp.signal_group(daemon, signal.SIGKILL)
            daemon.wait(timeout=10)
            tp.wait_for(f"kill {k + 1}: every request of the killed run answered",
                        lambda: open_connections(fake_port) == 0, 60)
            barriers.append(time.time())
            stored_at_kill.append(stored_prompts(redis_port))
            in_flight_at_kill.append(running)
            tp.log(f"kill {k + 1}: SIGKILL after {len(read_call_log(call_log))} billed calls, "
                   f"{running} call(s) in flight, {len(stored_at_kill[-1])} verdicts stored")
        checks.true("one kill fell while calls were in flight", max(in_flight_at_kill) > 0,
                    in_flight_at_kill)
        # The last run goes until every sampled event is judged, then stops on SIGTERM. (It
        # used to stop when idle for 8 s: in one CI run under ASan it stopped with 177 events
        # unjudged and no call made, as if partitions were still held by a killed member whose
        # session had not expired; waiting for the outcome itself tells a late rebalance from a
        # lost event, which still fails here, and the log's kafka lines are printed.)
        log_start = os.path.getsize(log_path)
        daemon = start()

        def unjudged():
            overlap, llm = set(), set()
            if os.path.exists(jsonl):
                with open(jsonl) as f:
                    for line in f:
                        try:
                            j = json.loads(line)
                        except ValueError:
                            continue  # a line being written
                        for v in j["verdicts"]:
                            if v["judge"] == "context_overlap":
                                overlap.add(j["id"])
                            elif v["judge"] == JUDGE and (v.get("error", "ok") == "ok" or (
                                    v.get("error") == "no_context" and j["id"] not in with_contexts)):
                                llm.add(j["id"])
            return len(expected - (overlap & llm))

        try:
            tp.wait_for("the last run: every sampled event judged", lambda: unjudged() == 0, 300,
                        step=0.5)
        except tp.TestFailure:
            with open(log_path, errors="replace") as f:
                f.seek(log_start)
                tail = [l for l in f if "kafka" in l or "idle" in l or "stop" in l]
            print(f"{unjudged()} sampled events unjudged; the last run's kafka lines:\n" +
                  "".join(tail[-40:]))
            raise
        # Coverage (issue 31): the last run consumed redelivered messages (finished before a kill:
        # replay-skipped) and re-emitted stored verdicts; at rest every consumed event is
        # accounted for, once, by every judge.
        status, text = tp.http_get(f"http://127.0.0.1:{admin}/metrics")
        samples = tp.parse_metrics(text) if status == 200 else []
        tp.log(f"the last run: {tp.metric(samples, 'assay_events_consumed_total')} consumed, "
               f"{tp.metric(samples, 'assay_events_replay_skipped_total')} replay-skipped, "
               f"{tp.metric(samples, 'assay_judge_stored_verdicts_total')} stored verdicts "
               f"re-emitted, {tp.metric(samples, 'assay_events_sampled_out_total')} sampled out")
        checks.eq("coverage at rest: no event unaccounted for by any judge",
                  {"context_overlap": 0, JUDGE: 0}, tp.coverage_gaps(samples))
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=120)
        checks.eq("the last run stops on SIGTERM, code 0", 0, rc)
        with open(log_path, errors="replace") as f:
            f.seek(log_start)
            last_log = f.read()
        checks.true("the last run's exit summary: every event in one terminal counter per judge",
                    "coverage: each of the" in last_log and "coverage: " in last_log
                    and "a bug: please report" not in last_log,
                    [l for l in last_log.splitlines() if "coverage" in l])

        # ---- What the sinks hold.
        lines = []
        with open(jsonl) as f:
            for n, line in enumerate(f, 1):
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    checks.true(f"judgments.jsonl:{n} is one whole JSON record", False, line[:120])
        ids = collections.Counter(j["id"] for j in lines)
        overlap_ok, llm_ok, llm_other = set(), set(), collections.Counter()
        stored_lines, stored_cost = 0, 0.0
        for j in lines:
            for v in j["verdicts"]:
                if v["judge"] == "context_overlap":
                    overlap_ok.add(j["id"])
                elif v["judge"] == JUDGE:
                    outcome = v.get("error", "ok")
                    if outcome == "ok" or (outcome == "no_context" and j["id"] not in with_contexts):
                        llm_ok.add(j["id"])
                    else:
                        llm_other[outcome] += 1
                    if v.get("stored"):
                        stored_lines += 1
                        stored_cost += v.get("cost_eur", 0)
        lost = expected - (overlap_ok & llm_ok)
        duplicates = sum(c - 1 for c in ids.values())
        checks.eq("judged events are exactly the sampled ones", set(), set(ids) ^ expected)
        checks.eq("sampled events without both verdicts (lost)", 0, len(lost))
        checks.eq("LLM verdicts other than a score or no_context", {}, dict(llm_other))
        checks.eq("cost of the re-emitted (stored) verdicts", 0.0, stored_cost)

        # ---- What the provider billed.
        calls = read_call_log(call_log)
        by_prompt = collections.defaultdict(list)
        for c in calls:
            by_prompt[c[0]].append(c)
        twice = {h: v for h, v in by_prompt.items() if len(v) > 1}

        def run_of(received):
            """The run that sent a request the provider read at `received` (0-based; the runs
            killed are 0 .. kills-1, the last one is `kills`)."""
            return next((k for k, b in enumerate(barriers) if received <= b), len(barriers))

        def why_not(h, calls):
            """None when every repeated call of prompt h is explained by a kill, else why not."""
            for first, again in zip(calls, calls[1:]):
                k = run_of(first[1])
                if k == len(barriers):
                    return f"paid again within the last run (calls at {first[1]:.3f}, {again[1]:.3f})"
                if h in stored_at_kill[k]:
                    return f"its verdict was stored when run {k + 1} was killed, yet paid again"
                if run_of(again[1]) <= k:
                    return f"paid twice within run {k + 1}"
            return None
        unexplained = {h: why for h, why in ((h, why_not(h, v)) for h, v in twice.items()) if why}
        checks.eq("billed prompts == sampled events with contexts", len(with_contexts), len(by_prompt))
        detail = "; ".join(f"{h}: {why}" for h, why in list(unexplained.items())[:5])
        checks.true("prompts paid twice but for a kill before their verdict was stored (0)",
                    not unexplained, f"{len(unexplained)}: {detail}")

        # ---- What the store holds.
        values = collections.Counter(
            v[:2] for v in redis_values(redis_port, f"assay:*:verdict:{JUDGE}:*"))
        checks.eq("verdicts in the store == billed prompts", len(by_prompt), values.get("V:", 0))
        checks.eq("leases left in the store", 0, values.get("L:", 0))
        spent = sum(int(v or 0) for v in redis_values(redis_port, "assay:*:budget:*:global:spent")) / 1e9
        stood = sum(v[-1][3] for v in by_prompt.values())
        billed = sum(c[3] for c in calls)
        one_call = max((c[3] for c in calls), default=0)
        checks.true("Redis spend == cost of the calls whose verdict stood (± one call per kill)",
                    stood - one_call * args.kills - 1e-9 <= spent <= billed + 1e-9,
                    f"spent {spent:.9f}, stood {stood:.9f}, billed {billed:.9f}")
        tp.log(f"figures: sampled {len(expected)}, LLM verdicts needed {len(with_contexts)}, "
               f"lost {len(lost)}, provider calls {len(calls)}, prompts paid twice {len(twice)} "
               f"(all during a kill: {len(twice) - len(unexplained)}), judgment lines {len(lines)}, "
               f"duplicate lines {duplicates}, stored verdicts re-emitted {stored_lines}; "
               f"EUR billed {billed:.6f}, settled in Redis {spent:.6f}, of verdicts that stood {stood:.6f}")
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)
    return (f"{args.kills} kills: {len(expected)} sampled, 0 lost, {duplicates} duplicate lines, "
            f"{len(twice)} prompt(s) paid twice, each during a kill")


if __name__ == "__main__":
    sys.exit(tp.run_script("test_kill_restart", run, tp.common_args(
        ("--events", int, 3000), ("--partitions", int, 12), ("--rate", float, 0.2),
        ("--kills", int, 3), ("--latency-ms", int, 100), ("--seed", int, None))))
