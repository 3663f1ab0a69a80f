#!/usr/bin/python3
"""The whole daemon with an LLM judge against the fake provider, and a budget that runs out.

  1. a real redis-server on a free loopback port (the shared budget ledger);
  2. a test CA made with openssl, and the fake OpenAI-compatible provider over HTTPS
     (tests/tools/fake_llm_server.cpp) trusting nothing but that CA (`ca_file`);
  3. assayd on its embedded broker replays the dev data with a `kind: llm` faithfulness judge
     (gpt-4o-mini prices) and a global cap of EUR 0.02 per day in Redis;
  4. a second assayd (a restart, another consumer group) replays the data again the same day.

Asserts: the first run judged some events with the LLM and then skipped the rest with
`skipped_budget`; settled spend in Redis <= cap (+ at most one call's worst case) and equals
the sum of cost_eur in the JSON Lines and assay_judge_cost_euros_total; assay_budget_exhausted 1;
self-judging counted (gpt-judged GPT answers); the restarted daemon makes no LLM call at all
(every LLM verdict skipped_budget, the provider's request count unchanged).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

CAP_EUR = 0.02


def make_ca(workdir):
    d = workdir
    cmds = [
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
        "-out ca.pem -days 2 -subj '/CN=assay test CA'",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key "
        "-out server.csr -subj '/CN=localhost'",
        "printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > ext.cnf",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem "
        "-days 2 -extfile ext.cnf",
    ]
    for c in cmds:
        subprocess.run(c, shell=True, cwd=d, check=True, capture_output=True)
    return os.path.join(d, "ca.pem"), os.path.join(d, "server.pem"), os.path.join(d, "server.key")


def fake_requests(port, ca):
    import ssl
    import urllib.request
    ctx = ssl.create_default_context(cafile=ca)
    with urllib.request.urlopen(f"https://localhost:{port}/_fake/stats", context=ctx, timeout=5) as r:
        return json.loads(r.read())["requests"]


def write_config(path, group, redis_port, fake_port, ca, admin_port, jsonl,
                 key="api_key_env: ASSAY_TEST_LLM_KEY"):
    with open(path, "w") as f:
        f.write(f"""kafka: {{brokers: embedded, topic: rag.events, group_id: {group}}}
sampling: {{rate: 1.0}}
budget:
  daily_limit_eur: {CAP_EUR}
  usd_to_eur: 0.92
  timezone: Europe/Paris
  store: redis://127.0.0.1:{redis_port}/0
  key_prefix: "assay:shared-ledger:"   # both runs (two consumer groups) share one ledger
judges:
  - {{name: citation, kind: check, check: cites_source}}
  - name: faithfulness_llm
    kind: llm
    criterion: faithfulness
    provider: openai
    endpoint: https://localhost:{fake_port}/v1
    ca_file: {json.dumps(ca)}
    model: gpt-4o-mini
    {key}
    max_in_flight: 4
    timeout_ms: 10000
admin: {{listen: "127.0.0.1:{admin_port}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")


def run_daemon(args, cfg, port, workdir, name, events, env=None):
    log = open(os.path.join(workdir, name + ".log"), "wb")
    env = env or dict(os.environ, ASSAY_TEST_LLM_KEY="sk-fake")
    proc = subprocess.Popen([args.assayd, "--config", cfg, "--replay", args.data, "--exit-when-idle", "7"],
                            stdout=log, stderr=log, env=env, start_new_session=True)
    log.close()
    samples = None
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        status, text = tp.http_get(f"http://127.0.0.1:{port}/metrics")
        if status == 200:
            s = tp.parse_metrics(text)
            if tp.metric(s, "assay_events_judged_total") == events and \
                    tp.metric(s, "assay_budget_exhausted", scope="global") == 1:
                samples = s
                break
        time.sleep(0.3)
    rc = proc.wait(timeout=120)
    return rc, samples


def llm_verdicts(path):
    out = []
    with open(path) as f:
        for line in f:
            judgment = json.loads(line)
            for v in judgment["verdicts"]:
                if v["judge"] == "faithfulness_llm":
                    out.append(dict(v, id=judgment["id"]))
    return out


def redis_spent(redis_port):
    keys = subprocess.run(["redis-cli", "-p", str(redis_port), "--scan", "--pattern", "assay:shared-ledger:budget:*:global:spent"],
                          capture_output=True, text=True).stdout.split()
    total = 0
    for k in keys:
        total += int(subprocess.run(["redis-cli", "-p", str(redis_port), "get", k],
                                    capture_output=True, text=True).stdout.strip() or 0)
    return total / 1e9


def main():
    args = tp.common_args()
    workdir = tempfile.mkdtemp(prefix="assay_llm_")
    checks = tp.Checks()
    redis = fake = None
    try:
        with open(args.data) as f:
            events = sum(1 for l in f if l.strip())
        redis, redis_port = tp.start_redis(workdir)
        ca, cert, key = make_ca(workdir)
        fake, fake_port = tp.start_fake_provider(args.assayd, "--cert", cert, "--key", key,
                                                 "--api-key", "sk-fake")

        port1 = tp.free_loopback_port()
        cfg1 = os.path.join(workdir, "a.yaml")
        jsonl1 = os.path.join(workdir, "a.jsonl")
        write_config(cfg1, "llm-a", redis_port, fake_port, ca, port1, jsonl1)
        rc, samples = run_daemon(args, cfg1, port1, workdir, "a", events)
        checks.eq("first run exit code", 0, rc)
        checks.true("first run: /metrics showed all events judged and the budget exhausted", samples is not None)
        verdicts = llm_verdicts(jsonl1)
        ok = [v for v in verdicts if "error" not in v]
        skipped = [v for v in verdicts if v.get("error") == "skipped_budget"]
        tp.log(f"first run: {len(verdicts)} LLM verdicts, {len(ok)} scored, {len(skipped)} skipped_budget, "
               f"others {len(verdicts) - len(ok) - len(skipped)}")
        checks.true("some events got an LLM score", len(ok) > 10, len(ok))
        checks.true("the budget ran out part-way (skipped_budget)", len(skipped) > 50, len(skipped))
        checks.true("scores are within the rubric", all(1 <= v["score"] <= 4 for v in ok))
        # One log line when the cap is reached (issue 29: none said so), not one per refusal.
        with open(os.path.join(workdir, "a.log"), errors="replace") as f:
            cap_lines = [l for l in f if "the daily cap of" in l and "is reached" in l]
        checks.eq("log lines saying the global cap is reached", 1,
                  sum(1 for l in cap_lines if "budget global:" in l))
        jsonl_cost = sum(v.get("cost_eur", 0) for v in verdicts)
        spent = redis_spent(redis_port)
        worst = max(v["cost_eur"] for v in ok) * 3 if ok else 0  # a generous one-call worst case
        tp.log(f"settled in Redis EUR {spent:.6f}, JSON Lines EUR {jsonl_cost:.6f}, cap EUR {CAP_EUR}; "
               f"overshoot EUR {spent - CAP_EUR:.6f}")
        checks.true("settled spend <= cap + one call's worst case", spent <= CAP_EUR + worst, spent)
        checks.true("Redis spend == sum of cost_eur in the JSON Lines", abs(spent - jsonl_cost) < 1e-6,
                    f"{spent} vs {jsonl_cost}")
        if samples:
            checks.true("assay_judge_cost_euros_total == JSON Lines cost",
                        abs(tp.metric(samples, "assay_judge_cost_euros_total") - jsonl_cost) < 1e-6)
            checks.eq("assay_budget_exhausted{scope=global}", 1, tp.metric(samples, "assay_budget_exhausted", scope="global"))
            checks.eq("assay_budget_limit_euros{scope=global}", CAP_EUR, tp.metric(samples, "assay_budget_limit_euros", scope="global"))
            checks.true("self-judging counted (GPT answers judged by gpt-4o-mini)",
                        (tp.metric(samples, "assay_judge_self_judging_total") or 0) > 0)
            checks.eq("skipped_budget runs in metrics == in JSON Lines", len(skipped),
                      tp.metric(samples, "assay_judge_runs_total", judge="faithfulness_llm", outcome="skipped_budget"))
            checks.true("input tokens counted", (tp.metric(samples, "assay_judge_tokens_total", direction="input") or 0) > 1000)

        before = fake_requests(fake_port, ca)
        port2 = tp.free_loopback_port()
        cfg2 = os.path.join(workdir, "b.yaml")
        jsonl2 = os.path.join(workdir, "b.jsonl")
        # The second run takes its key the systemd way: LoadCredential= puts the file in
        # $CREDENTIALS_DIRECTORY and api_key_file names it (the fake provider checks the key).
        creds = os.path.join(workdir, "credentials")
        os.makedirs(creds)
        with open(os.path.join(creds, "openai_api_key"), "w") as f:
            f.write("sk-fake\n")
        write_config(cfg2, "llm-b", redis_port, fake_port, ca, port2, jsonl2,
                     key="api_key_file: openai_api_key")
        env2 = {k: v for k, v in os.environ.items() if k != "ASSAY_TEST_LLM_KEY"}
        env2["CREDENTIALS_DIRECTORY"] = creds
        rc2, _ = run_daemon(args, cfg2, port2, workdir, "b", events, env=env2)
        checks.eq("restarted daemon exit code", 0, rc2)
        v2 = llm_verdicts(jsonl2)
        import collections
        outcomes2 = collections.Counter(v.get("error", "ok") for v in v2)
        tp.log(f"restarted daemon: LLM outcomes {dict(outcomes2)}")
        # Events without contexts are no_context (decided before the budget); an event the first
        # run paid for re-emits its stored verdict ("stored": true, the same score, no charge);
        # every other one is skipped_budget (the day's cap was reached in the first run).
        checks.true("restarted daemon: every call skipped_budget, no_context or a stored verdict",
                    v2 and set(outcomes2) <= {"skipped_budget", "ok", "no_context"}
                    and outcomes2["skipped_budget"] > 0, dict(outcomes2))
        first_scores = {v["id"]: v["score"] for v in ok}
        stored = [v for v in v2 if "error" not in v]
        checks.true("restarted daemon: every score is a stored one, charged nothing",
                    all(v.get("stored") is True and v.get("cost_eur", 0) == 0 for v in stored), "")
        again = {v["id"]: v["score"] for v in stored}
        checks.true(f"restarted daemon: the first run's {len(first_scores)} scores re-emitted, the same",
                    first_scores == again, f"{len(again)} re-emitted, "
                    f"{sum(again.get(k) != s for k, s in first_scores.items())} differ or missing")
        checks.true("Redis spend unchanged by the restart", abs(redis_spent(redis_port) - spent) < 1e-9,
                    redis_spent(redis_port))
        checks.eq("restarted daemon made no provider call", before, fake_requests(fake_port, ca))
        # Security (issue 9): no API key, Authorization header or event text in any log line
        # of two runs that called a provider with a key.
        logs = ""
        for n in ("a", "b"):
            with open(os.path.join(workdir, n + ".log"), errors="replace") as f:
                logs += f.read()
        texts = []
        with open(args.data) as f:
            for line in f:
                if line.strip():
                    ev = json.loads(line)
                    texts += [t[:60] for t in (ev.get("question"), ev.get("answer")) if t and len(t) >= 30]
        leaked = [t for t in texts if t in logs]
        checks.true("no API key or Authorization header in the logs",
                    "sk-fake" not in logs and "Bearer" not in logs and "authorization" not in logs.lower(), "")
        checks.eq(f"questions and answers ({len(texts)}) found in the logs", [], leaked[:3])
    except (tp.TestFailure, subprocess.CalledProcessError) as e:
        checks.true("test ran to the end", False, str(e))
    finally:
        for p, n in ((fake, "fake provider"), (redis, "redis")):
            tp.stop_process(p, n)
        checks.report()
        if checks.failed():
            for n in ("a", "b"):
                print(f"--- {n}.log\n{tp.tail(os.path.join(workdir, n + '.log'))}")
        shutil.rmtree(workdir, ignore_errors=True)
    return checks.finish("the LLM judge stayed within its daily budget, shared through Redis")


if __name__ == "__main__":
    sys.exit(main())
