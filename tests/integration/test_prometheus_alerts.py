#!/usr/bin/python3
"""A real Prometheus server scrapes assayd with the shipped alert rules and fires three alerts
(issue 10, "It says when it is not working").

  1. a Kafka broker in its own process (tests/tools/mock_broker.cpp), the fake OpenAI-compatible
     provider over HTTP (tests/tools/fake_llm_server.cpp), and assayd at rate 1.0 with a
     context_overlap judge (criterion faithfulness; baseline_window and recent_window 30 scores,
     the default drift_alpha and drift_min_delta) and an LLM judge (answer_relevancy) under a
     global cap of EUR 0.001 a day (memory budget store);
  2. Debian's /usr/bin/prometheus on a free loopback port, a temporary --storage.tsdb.path,
     scrape_interval and evaluation_interval 1s, scraping assayd's admin port, with the rules of
     config/prometheus/assay-rules.yml. Their `for:` durations (5 to 60 minutes) are too long
     for a test: the test loads a copy in which every `for:` line is rewritten to --for (3s),
     and checks that nothing else differs: the expressions, labels and annotations are the
     shipped ones, unchanged;
  3. AssayFaithfulnessDrift: the first 60 dev events with contexts are produced and judged
     (the frozen baseline: the first 30 context_overlap scores), then 60 others whose contexts
     are those of an unrelated question (a retriever returning the wrong documents), so the
     recent faithfulness scores drift down. Its description must show the baseline mean above
     the recent one (the rule's `query` template, evaluated by Prometheus);
     AssayBudgetExhausted: the LLM judge's calls exhaust the cap within a few events
     (assay_budget_exhausted{scope="global"} 1);
     meanwhile AssayNotConsuming must be neither pending nor firing;
  4. AssayNotConsuming: the broker process is stopped, assay_kafka_brokers_reachable goes 0,
     and the alert fires with reason="brokers_unreachable", severity critical and its
     runbook_url.
Each alert is read from Prometheus' /api/v1/alerts with state "firing", its labels and its
runbook_url checked. Every wait polls with a deadline (no fixed sleeps), for loaded machines.

Run by ctest (tests/CMakeLists.txt):
  /usr/bin/python3 test_prometheus_alerts.py --assayd PATH --mock-broker PATH \
      --data rag_events_dev.jsonl [--prometheus /usr/bin/prometheus] \
      [--rules config/prometheus/assay-rules.yml] [--for 3s] [--timeout 60] [--keep-temp]
(--timeout: seconds each stage may take: judging each batch, each alert.)
Only loopback is used; everything started is stopped, and the temporary directory removed
(unless --keep-temp), even on failure. Exit code 0 = every check passed, 1 = a check failed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENTS_TOPIC, PARTITIONS = "prom.events", 2
GOOD_EVENTS, BAD_EVENTS = 60, 60  # before and after the retriever "breaks"
BASELINE_WINDOW = RECENT_WINDOW = 30
CAP_EUR = 0.001
DRIFT_JUDGE = "overlap"
JOB = "assayd"
FOR_LINE = re.compile(r"^(\s*for:\s*)(\S+)(\s*)$")


def log(msg):
    print(f"[test_prometheus_alerts] {msg}", flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assayd", required=True)
    ap.add_argument("--mock-broker", required=True)
    ap.add_argument("--data", required=True, help="rag_events_dev.jsonl")
    ap.add_argument("--keep-temp", action="store_true", help="keep the temporary directory")
    ap.add_argument("--prometheus", default="/usr/bin/prometheus")
    ap.add_argument("--rules", default=os.path.join(REPO, "config/prometheus/assay-rules.yml"),
                    help="the shipped rule file (default: the repository's)")
    ap.add_argument("--for", dest="for_", default="3s", metavar="DURATION",
                    help="the `for:` every alert gets in the test's copy of the rules")
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds each stage may take (judging each batch, each alert)")
    return ap.parse_args()


# ---------------------------------------------------------------------------------------------
# Inputs


def build_events(data_path):
    """(good, bad) events: the first GOOD_EVENTS dev events with contexts and an answer, and
    BAD_EVENTS others, each given the contexts of an event with another question."""
    pool = []
    with open(data_path, "rb") as f:
        for raw in f:
            if raw.strip():
                e = json.loads(raw)
                if e.get("contexts") and e.get("answer"):
                    pool.append(e)
    if len(pool) < GOOD_EVENTS + BAD_EVENTS:
        raise tp.TestFailure(f"{data_path}: {len(pool)} events with contexts, the test needs "
                             f"{GOOD_EVENTS + BAD_EVENTS}")
    good = pool[:GOOD_EVENTS]
    rest = pool[GOOD_EVENTS:GOOD_EVENTS + BAD_EVENTS]
    bad = []
    for n, e in enumerate(rest):
        # Contexts from half the list away, skipping an event about the same question.
        k = (n + len(rest) // 2) % len(rest)
        while rest[k]["question"] == e["question"] or k == n:
            k = (k + 1) % len(rest)
        bad.append(dict(e, id=e["id"] + "-wrong-contexts", contexts=rest[k]["contexts"]))
    return good, bad


def write_assayd_config(path, bootstrap, admin_port, jsonl, fake_port):
    q = json.dumps
    with open(path, "w") as f:
        f.write(f"""# written by tests/integration/test_prometheus_alerts.py
kafka:
  brokers: {q(bootstrap)}
  topic: {q(EVENTS_TOPIC)}
  group_id: {q(f"prom-{os.getpid()}")}
sampling:
  rate: 1.0
judges:
  - {{name: {DRIFT_JUDGE}, kind: lexical, metric: context_overlap}}
  - name: relevancy_llm
    kind: llm
    criterion: answer_relevancy
    provider: openai
    endpoint: http://127.0.0.1:{fake_port}/v1
    model: gpt-4o-mini
    api_key_env: ASSAY_TEST_LLM_KEY
    max_in_flight: 2
    timeout_ms: 10000
budget:
  daily_limit_eur: {CAP_EUR}
tracking:
  baseline_window: {BASELINE_WINDOW}
  recent_window: {RECENT_WINDOW}
admin:
  listen: "127.0.0.1:{admin_port}"
sinks:
  jsonl: {{path: {q(jsonl)}}}
""")


def write_test_rules(shipped, copy, for_):
    """The shipped rules with every `for:` rewritten to for_; returns how many were. Fails
    unless the two files differ in those lines only."""
    with open(shipped) as f:
        lines = f.read().split("\n")
    out, rewritten = [], 0
    for line in lines:
        m = FOR_LINE.match(line)
        if m:
            line = m.group(1) + for_ + m.group(3)
            rewritten += 1
        out.append(line)
    with open(copy, "w") as f:
        f.write("\n".join(out))
    with open(copy) as f:
        copied = f.read().split("\n")
    differ = [(a, b) for a, b in zip(lines, copied) if a != b]
    if len(lines) != len(copied) or any(not (FOR_LINE.match(a) and FOR_LINE.match(b))
                                        for a, b in differ):
        raise tp.TestFailure("the test's copy of the rules differs in more than `for:` lines")
    return rewritten


def write_prometheus_config(path, rules, admin_port):
    with open(path, "w") as f:
        f.write(f"""# written by tests/integration/test_prometheus_alerts.py
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {json.dumps(rules)}
scrape_configs:
  - job_name: {JOB}
    static_configs:
      - targets: ["127.0.0.1:{admin_port}"]
""")


# ---------------------------------------------------------------------------------------------
# Prometheus


def start_prometheus(binary, workdir, config):
    """Prometheus on a free loopback port; returns (process, base URL, log path) once
    /-/ready answers 200 (three ports tried: one may be taken between the probe and the bind)."""
    log_path = os.path.join(workdir, "prometheus.log")
    for _ in range(3):
        port = tp.free_loopback_port()
        with open(log_path, "ab") as lf:
            proc = subprocess.Popen(
                [binary, f"--config.file={config}",
                 f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{port}",
                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if tp.http_get(url + "/-/ready")[0] == 200:
                return proc, url, log_path
            time.sleep(0.2)
        tp.stop_process(proc, "prometheus", term_timeout=10)
        if "address already in use" not in tp.tail(log_path, 5):
            break
        log(f"port {port} was taken meanwhile; retrying")
    raise tp.TestFailure("prometheus did not become ready:\n" + tp.tail(log_path, 20))


def api(url, path, **params):
    """The `data` of a Prometheus API answer; None when it does not answer with success."""
    query = ("?" + urllib.parse.urlencode(params)) if params else ""
    status, body = tp.http_get(url + path + query, timeout=5)
    if status != 200:
        return None
    try:
        reply = json.loads(body)
    except ValueError:
        return None
    return reply.get("data") if reply.get("status") == "success" else None


def alerts(url, name):
    """The alerts named `name` in /api/v1/alerts (every state)."""
    data = api(url, "/api/v1/alerts")
    if data is None:
        return []
    return [a for a in data.get("alerts", []) if a["labels"].get("alertname") == name]


def wait_firing(url, name, timeout, **labels):
    """Polls /api/v1/alerts until an alert `name` whose labels include `labels` is firing;
    returns it and the seconds waited."""
    t0 = time.monotonic()
    found = []

    def firing():
        found[:] = [a for a in alerts(url, name) if a["state"] == "firing" and
                    all(a["labels"].get(k) == v for k, v in labels.items())]
        return bool(found)

    tp.wait_for(f"{name} {labels or ''} firing in /api/v1/alerts", firing, timeout, step=0.5)
    return found[0], time.monotonic() - t0


def instant(url, query):
    """Values of an instant query: [(labels, value)]."""
    data = api(url, "/api/v1/query", query=query)
    if not data:
        return []
    return [(r["metric"], float(r["value"][1])) for r in data.get("result", [])]


# ---------------------------------------------------------------------------------------------
# The test


def check_alert(checks, alert, name, severity):
    checks.eq(f"{name}: severity", severity, alert["labels"].get("severity"))
    checks.eq(f"{name}: job", JOB, alert["labels"].get("job"))
    checks.eq(f"{name}: runbook_url", f"docs/alerting.md#{name.lower()}",
              alert["annotations"].get("runbook_url"))
    checks.true(f"{name}: description (runbook text) rendered",
                len(alert["annotations"].get("description", "")) > 100 and
                "{{" not in alert["annotations"]["description"],
                alert["annotations"].get("description"))


def run(args, workdir, checks):
    t_start = time.monotonic()
    broker = fake = assayd = prom = None
    assayd_log = os.path.join(workdir, "assayd.log")
    prom_log = os.path.join(workdir, "prometheus.log")
    finished = False
    try:
        if not os.access(args.prometheus, os.X_OK):
            raise tp.TestFailure(f"{args.prometheus} not found: run scripts/setup")
        good, bad = build_events(args.data)

        # ---- Prometheus' configuration: the shipped rules, `for:` shortened.
        rules = os.path.join(workdir, "assay-rules.yml")
        n_for = write_test_rules(args.rules, rules, args.for_)
        pc = subprocess.run(["promtool", "check", "rules", rules], capture_output=True,
                            text=True, timeout=60)
        if not checks.eq("promtool check rules (the test's copy)", 0, pc.returncode):
            raise tp.TestFailure(pc.stdout + pc.stderr)
        log(f"rules: {args.rules}, {n_for} `for:` rewritten to {args.for_}, nothing else")

        # ---- Broker, fake provider, assayd.
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir,
                                            [f"{EVENTS_TOPIC}:{PARTITIONS}"])
        fake, fake_port = tp.start_fake_provider(args.assayd)
        admin_port = tp.free_loopback_port()
        cfg = os.path.join(workdir, "assayd.yaml")
        write_assayd_config(cfg, bootstrap, admin_port, os.path.join(workdir, "j.jsonl"),
                            fake_port)
        cc = subprocess.run([args.assayd, "--check-config", cfg], capture_output=True,
                            timeout=60)
        if not checks.eq("assayd --check-config exit code", 0, cc.returncode):
            raise tp.TestFailure((cc.stdout + cc.stderr).decode())
        tp.produce_keyed(bootstrap, EVENTS_TOPIC, [(e["id"], json.dumps(e).encode())
                                                   for e in good])
        with open(assayd_log, "wb") as lf:
            assayd = subprocess.Popen([args.assayd, "--config", cfg], stdin=subprocess.DEVNULL,
                                      stdout=lf, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, ASSAY_TEST_LLM_KEY="sk-fake"),
                                      start_new_session=True)
        base = f"http://127.0.0.1:{admin_port}"

        prom_cfg = os.path.join(workdir, "prometheus.yml")
        write_prometheus_config(prom_cfg, rules, admin_port)
        prom, prom_url, prom_log = start_prometheus(args.prometheus, workdir, prom_cfg)
        log(f"prometheus pid {prom.pid} at {prom_url}, assayd pid {assayd.pid} at {base}")

        def judged(n):
            if assayd.poll() is not None:
                raise tp.TestFailure(f"assayd exited with {assayd.returncode}")
            return tp.judged_count(base) == n

        tp.wait_for(f"the {len(good)} good events judged", lambda: judged(len(good)),
                    args.timeout, step=0.2)
        tp.produce_keyed(bootstrap, EVENTS_TOPIC, [(e["id"], json.dumps(e).encode())
                                                   for e in bad])
        tp.wait_for(f"the {len(bad)} events with the wrong contexts judged",
                    lambda: judged(len(good) + len(bad)), args.timeout, step=0.2)
        log(f"{len(good)} + {len(bad)} events judged {time.monotonic() - t_start:.1f} s "
            f"after start")
        tp.wait_for("Prometheus scraping assayd (up == 1)",
                    lambda: [v for _, v in instant(prom_url, f'up{{job="{JOB}"}}')] == [1.0],
                    args.timeout, step=0.5)

        # ---- AssayFaithfulnessDrift.
        drift, waited = wait_firing(prom_url, "AssayFaithfulnessDrift", args.timeout,
                                    judge=DRIFT_JUDGE)
        log(f"AssayFaithfulnessDrift firing after {waited:.1f} s: "
            f"{drift['annotations'].get('description', '')[:80]}")
        check_alert(checks, drift, "AssayFaithfulnessDrift", "warning")
        checks.eq("AssayFaithfulnessDrift: criterion", "faithfulness",
                  drift["labels"].get("criterion"))
        m = re.match(r"Baseline mean ([0-9.]+), recent mean ([0-9.]+)\.",
                     drift["annotations"].get("description", ""))
        checks.true("AssayFaithfulnessDrift: its description shows the baseline mean above "
                    "the recent one (queried by Prometheus)",
                    m and float(m.group(1)) > float(m.group(2)),
                    drift["annotations"].get("description", "")[:80])

        # ---- AssayBudgetExhausted.
        budget, waited = wait_firing(prom_url, "AssayBudgetExhausted", args.timeout,
                                     scope="global")
        log(f"AssayBudgetExhausted firing after {waited:.1f} s more")
        check_alert(checks, budget, "AssayBudgetExhausted", "warning")
        spent = instant(prom_url, 'assay_budget_spent_euros{scope="global"}')
        checks.true(f"the LLM judge spent money before the cap of EUR {CAP_EUR} closed",
                    spent and spent[0][1] > 0, spent)

        # ---- Consuming: AssayNotConsuming neither pending nor firing.
        checks.eq("AssayNotConsuming while assayd consumes (any state)", [],
                  [(a["labels"], a["state"]) for a in alerts(prom_url, "AssayNotConsuming")])
        checks.eq("assay_kafka_brokers_reachable while the broker runs (Prometheus)", [1.0],
                  [v for _, v in instant(prom_url, "assay_kafka_brokers_reachable")])

        # ---- The broker process stops: AssayNotConsuming.
        tp.stop_process(broker, "mock broker", term_timeout=10)
        broker = None
        t_down = time.monotonic()
        log("mock broker stopped")
        down, waited = wait_firing(prom_url, "AssayNotConsuming", args.timeout,
                                   reason="brokers_unreachable")
        log(f"AssayNotConsuming firing {waited:.1f} s after the broker stopped")
        check_alert(checks, down, "AssayNotConsuming", "critical")
        checks.eq("AssayNotConsuming: instance", f"127.0.0.1:{admin_port}",
                  down["labels"].get("instance"))
        checks.eq("assay_kafka_brokers_reachable after the broker stopped (Prometheus)", [0.0],
                  [v for _, v in instant(prom_url, "assay_kafka_brokers_reachable")])
        checks.true("assayd still up (scraped) while not consuming",
                    [v for _, v in instant(prom_url, f'up{{job="{JOB}"}}')] == [1.0])
        checks.eq("AssayDown not firing", [],
                  [a["state"] for a in alerts(prom_url, "AssayDown")])

        summary = (f"AssayFaithfulnessDrift, AssayBudgetExhausted and AssayNotConsuming fired in "
                   f"a real Prometheus (`for:` {args.for_}); AssayNotConsuming "
                   f"{time.monotonic() - t_down:.1f} s after the broker stopped; "
                   f"total {time.monotonic() - t_start:.1f} s")
        finished = True
        return summary
    finally:
        tp.stop_process(prom, "prometheus", term_timeout=15)
        # With its broker gone, assayd's clean stop waits for Kafka: the test does not test
        # shutdown, so it gets a few seconds before SIGKILL.
        tp.stop_process(assayd, "assayd", term_timeout=5 if broker is None else 20)
        tp.stop_process(broker, "mock broker", term_timeout=10)
        tp.stop_process(fake, "fake provider", term_timeout=10)
        if not finished or checks.failed():
            for name, path in (("assayd", assayd_log), ("prometheus", prom_log)):
                if os.path.exists(path):
                    print(f"---- {name} log (tail) ----\n{tp.tail(path)}\n----", flush=True)


def main():
    args = parse_args()
    for tool in ("kcat", "promtool"):
        if not shutil.which(tool):
            print(f"test_prometheus_alerts: '{tool}' not found: run scripts/setup",
                  file=sys.stderr)
            return 1
    return tp.run_script("test_prometheus_alerts", run, args)


if __name__ == "__main__":
    sys.exit(main())
