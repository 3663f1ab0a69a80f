#!/usr/bin/python3
"""SIGHUP applies judges and caps live (issue 10, "Signals": "a valid file applies rates,
judges and caps without losing queued samples or in-flight calls").

assayd consumes from a broker process at rate 1.0 with two judges: `overlap` (context_overlap)
and `f`, an LLM faithfulness judge against the fake provider (50 ms per call), under a global
cap of EUR 0.001 a day: a few calls, then `skipped_budget` and assay_budget_exhausted 1.
The first half of the events is judged; then, with calls still in flight for the last of
them, the configuration changes and SIGHUP is sent: `overlap` removed, a check `nonempty`
added, the cap raised to EUR 5.
Asserts: the reload is counted as applied and logged with the judges rebuilt;
assay_budget_limit_euros{scope="global"} reads 5 and assay_budget_exhausted 0; every
first-half event has exactly one judgment (none lost, none twice); every second-half event is
judged by `f` (ok: the cap opened again, no skipped_budget) and `nonempty`, none by `overlap`;
SIGTERM then stops assayd with exit code 0. Issue 31: the reload also changes f's model, so f
gets a new judge_version: /metrics shows two versions of f (info, current, one change counted,
runs under each), the log names the change ("changed: model"), the second half's verdicts carry
the new version, and `assay report` summarises f per version with the changed field.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

HALF = 60


def config(bootstrap, admin, jsonl, fake_port, cap, judges, model="gpt-4o-mini"):
    llm = (f'  - {{name: f, kind: llm, criterion: faithfulness, endpoint: '
           f'"http://127.0.0.1:{fake_port}/v1", model: {model}, '
           f'api_key_env: ASSAY_TEST_LLM_KEY}}\n')
    lines = {"overlap": "  - {name: overlap, kind: lexical, metric: context_overlap}\n",
             "nonempty": "  - {name: nonempty, kind: check, check: answer_nonempty}\n",
             "f": llm}
    kafka = {"brokers": bootstrap, "topic": tp.EVENTS_TOPIC, "group_id": "reload-judges"}
    return (f"kafka: {json.dumps(kafka)}\n"
            "sampling: {rate: 1.0}\n"
            f"budget: {{daily_limit_eur: {cap}}}\n"
            "judges:\n" + "".join(lines[j] for j in judges) +
            f'admin: {{listen: "127.0.0.1:{admin}"}}\n'
            f"sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}\n")


def run(args, workdir, checks):
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        procs.append((broker, "broker"))
        fake, fake_port = tp.start_fake_provider(args.assayd, "--delay-ms", "50")
        procs.append((fake, "fake provider"))
        events = tp.load_dev_events(args.data)[:2 * HALF]
        admin = tp.free_loopback_port()
        url = f"http://127.0.0.1:{admin}"
        jsonl = os.path.join(workdir, "j.jsonl")
        cfg = os.path.join(workdir, "c.yaml")
        with open(cfg, "w") as f:
            f.write(config(bootstrap, admin, jsonl, fake_port, 0.001, ["overlap", "f"]))
        log_path = os.path.join(workdir, "assayd.log")
        env = dict(os.environ, ASSAY_TEST_LLM_KEY="sk-test")
        with open(log_path, "wb") as log:
            daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log, stderr=log,
                                      env=env, start_new_session=True)
        procs.append((daemon, "assayd"))
        tp.wait_for("/readyz 200", lambda: tp.http_get(url + "/readyz")[0] == 200, 30)

        def metrics():
            status, text = tp.http_get(url + "/metrics")
            return tp.parse_metrics(text) if status == 200 else []

        def value(name, **labels):
            return tp.metric(metrics(), name, **labels)

        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events[:HALF])
        tp.wait_for("the cap exhausted",
                    lambda: value("assay_budget_exhausted", scope="global") == 1, 60)
        with open(cfg, "w") as f:
            f.write(config(bootstrap, admin, jsonl, fake_port, 5, ["nonempty", "f"],
                           model="gpt-4o"))
        daemon.send_signal(signal.SIGHUP)
        tp.wait_for("the reload applied",
                    lambda: value("assay_config_reloads_total", result="applied") == 1, 15)
        tp.wait_for("the first half judged", lambda: tp.judged_count(url) == HALF, 60)
        checks.eq("global cap after the reload", 5.0,
                  value("assay_budget_limit_euros", scope="global"))
        tp.wait_for("assay_budget_exhausted back to 0",
                    lambda: value("assay_budget_exhausted", scope="global") == 0, 10)
        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events[HALF:])
        tp.wait_for("the second half judged", lambda: tp.judged_count(url) == 2 * HALF, 60)
        # Issue 31: the model change gave `f` a new version, seen on /metrics.
        samples = metrics()
        infos = sorted((l["judge_version"], v) for n, l, v in samples
                       if n == "assay_judge_version_info" and l.get("judge") == "f")
        checks.eq("f: two versions exported (assay_judge_version_info)", 2, len(infos))
        current = [l["judge_version"] for n, l, v in samples
                   if n == "assay_judge_version_current" and l.get("judge") == "f" and v == 1]
        checks.eq("f: one current version", 1, len(current))
        checks.eq("f: one version change counted", 1,
                  tp.metric(samples, "assay_judge_version_changes_total", judge="f"))
        new_version = current[0] if current else None
        old_version = next((v for v, _ in infos if v != new_version), None)
        checks.true("f: runs counted under each version's judge_version (the new one: the "
                    "second half, every outcome)",
                    (tp.metric(samples, "assay_judge_runs_total", judge="f",
                               judge_version=old_version) or 0) > 0 and
                    (tp.metric(samples, "assay_judge_runs_total", judge="f",
                               judge_version=new_version) or 0) == HALF,
                    [(l, v) for n, l, v in samples
                     if n == "assay_judge_runs_total" and l.get("judge") == "f" and v])
        daemon.send_signal(signal.SIGTERM)
        checks.eq("exit code after SIGTERM", 0, daemon.wait(timeout=60))
        with open(log_path) as f:
            log = f.read()
        checks.true("the log says the judges were rebuilt",
                    "SIGHUP: judges rebuilt (added 'nonempty', changed 'f', removed 'overlap', "
                    "the budget caps): "
                    "nonempty, f; global cap €5/day" in log, log[-3000:])
        checks.true("the log names the new version of f and what changed",
                    f"judge 'f': new version {new_version} (was {old_version}; changed: model)"
                    in log, log[-3000:])
        judgments, versions = {}, {}
        with open(jsonl) as f:
            for line in f:
                j = json.loads(line)
                judgments.setdefault(j["id"], []).append(
                    {v["judge"]: v.get("error", "ok") for v in j["verdicts"]})
                for v in j["verdicts"]:
                    if v["judge"] == "f":
                        versions.setdefault(j["id"], v.get("judge_version"))
        first, second = [e for e, _ in events[:HALF]], [e for e, _ in events[HALF:]]
        checks.eq("every event judged once (missing, twice)", (0, 0),
                  (sum(e not in judgments for e in first + second),
                   sum(len(judgments.get(e, [])) > 1 for e in first + second)))
        skipped_first = sum(judgments[e][0].get("f") == "skipped_budget" for e in first
                            if e in judgments)
        checks.true("the first half ran into the €0.001 cap", skipped_first > 0, skipped_first)
        after = [judgments[e][0] for e in second if e in judgments]
        checks.eq("second half: judges (overlap, nonempty, f) present", (0, len(after), len(after)),
                  (sum("overlap" in v for v in after), sum("nonempty" in v for v in after),
                   sum("f" in v for v in after)))
        checks.eq("f's judgments: the second half all of the new version", {new_version},
                  {versions.get(e) for e in second})
        checks.eq("f's judgments: the first half of the old one (but calls in flight at the "
                  "reload)", True,
                  sum(versions.get(e) == old_version for e in first) >= HALF - 8)
        # The report summarises each version on its own and names what changed.
        report = subprocess.run([os.path.join(os.path.dirname(args.assayd), "assay"), "report",
                                 "--judgments", jsonl], capture_output=True, text=True,
                                timeout=60)
        checks.eq("assay report exit code", 0, report.returncode)
        checks.true("assay report: f per version, the model named as changed",
                    f"f@{old_version}" in report.stdout and f"f@{new_version}" in report.stdout
                    and f"against {old_version}, changed: model" in report.stdout,
                    report.stdout[:3000])
        outcomes = sorted({v.get("f") for v in after})
        checks.true("second half: no skipped_budget (the raised cap opened the scope)",
                    "skipped_budget" not in outcomes, outcomes)
        return (f"reload: {skipped_first} of {HALF} skipped_budget before, second half "
                f"f outcomes {outcomes}")
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_reload_judges", run, tp.common_args()))
