#!/usr/bin/python3
"""End-to-end test of watching the judges (issue 4): feedback topic, agreement, variants, A/B.

  1. a Kafka broker in its own process (librdkafka's mock cluster) with an events topic and a
     feedback topic of the same partition count;
  2. kcat produces the dev data keyed by id, each event given a variant (A or B) and an app, and
     feedback keyed by id: human annotations of faithfulness from the data's own labels
     (ExpertQA `labels.faithfulness`, mapped 1 + round(3 f)) by two annotators, user ratings
     (variant B rated lower), two invalid feedback messages and one for an id that never came;
  3. assayd judges everything with three faithfulness judges (context_overlap with default
     weights and with names weighted 4, and an LLM judge) and rouge_l, with small tracking
     windows;
  4. the last /metrics before assayd stops by itself is checked with promtool and against
     values computed here, independently, with scipy and sklearn from the JSON Lines output and
     the feedback sent: Kendall tau-b and Spearman between the two judges, judge-vs-human
     Spearman, Cohen's kappa (plain and quadratic) between the annotators, the variants' means,
     standard deviations and 95 % intervals, the A/B chi-square p-value, the top-score share;
     feedback counts; consumer lag 0; and every PromQL expression of the alert rules and the
     Grafana dashboard refers only to metric families this scrape exports.
An LLM faithfulness judge against the fake provider (HTTP, memory budget) makes the LLM and
budget series exist too.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import math
import os
import re
import select
import signal
import subprocess
import sys

import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

EVENTS_TOPIC, FEEDBACK_TOPIC, PARTITIONS = "track.events", "track.feedback", 4
JUDGES = ["overlap", "overlap_names"]  # both criterion faithfulness
TOL = 1e-9
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(f"[test_tracking] {msg}", flush=True)


def start_broker(mock_broker, workdir):
    err = open(os.path.join(workdir, "mock_broker.log"), "wb")
    proc = subprocess.Popen([mock_broker, f"{EVENTS_TOPIC}:{PARTITIONS}",
                             f"{FEEDBACK_TOPIC}:{PARTITIONS}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                            start_new_session=True)
    err.close()
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline().decode().strip() if ready else ""
    if not re.fullmatch(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+)*", line):
        raise tp.TestFailure(f"mock broker did not start (got {line!r})")
    return proc, line


def kcat_produce(bootstrap, topic, keyed_lines, workdir):
    path = os.path.join(workdir, f"{topic}.txt")
    with open(path, "wb") as f:
        for key, value in keyed_lines:
            f.write(key.encode() + b"\t" + value + b"\n")
    with open(path, "rb") as f:
        kc = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t"], stdin=f,
                            capture_output=True, timeout=120)
    if kc.returncode != 0:
        raise tp.TestFailure(f"kcat -P {topic}: {kc.stderr.decode()[-2000:]}")


def build_inputs(data_path):
    """Events with variants, and the feedback: (events, feedback lines, expectations)."""
    events, annotations, ratings = [], {}, {}
    with open(data_path, "rb") as f:
        for n, raw in enumerate(f):
            e = json.loads(raw)
            e["variant"] = "A" if n % 2 == 0 else "B"
            e["app"] = "qa"
            events.append(e)
    feedback = []
    for n, e in enumerate(events):
        eid = e["id"]
        f = (e.get("labels") or {}).get("faithfulness")
        if f is not None:
            expert = 1 + round(3 * f)
            # The second annotator agrees most of the time, one level off on every third item.
            crowd = expert if n % 3 else (expert - 1 if expert > 1 else 2)
            annotations[eid] = {"expert": expert, "crowd": crowd}
            for who, v in (("expert", expert), ("crowd", crowd)):
                feedback.append((eid, json.dumps({"id": eid, "kind": "annotation",
                                                  "criterion": "faithfulness", "value": v,
                                                  "annotator": who}).encode()))
        if n % 5 != 4:  # four events in five get a rating
            stars = (3 + n % 3) if e["variant"] == "A" else (1 + n % 4)
            ratings[eid] = stars
            feedback.append((eid, json.dumps({"id": eid, "kind": "rating",
                                              "value": stars}).encode()))
    feedback.append(("bad-1", b"{not json"))
    feedback.append(("bad-2", json.dumps({"id": "x", "kind": "rating", "value": 9}).encode()))
    feedback.append(("never-came", json.dumps({"id": "never-came", "kind": "rating",
                                               "value": 5}).encode()))
    return events, feedback, annotations, ratings


def write_config(path, bootstrap, group_id, port, jsonl_path, fake_port, canary_file):
    q = json.dumps
    text = f"""# written by tests/integration/test_tracking.py
kafka:
  brokers: {q(bootstrap)}
  topic: {q(EVENTS_TOPIC)}
  feedback_topic: {q(FEEDBACK_TOPIC)}
  group_id: {q(group_id)}
sampling:
  rate: 1.0
limits:
  queue_capacity: 10000
  max_event_bytes: 200000
  workers: 2
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
  - {{name: overlap_names, kind: lexical, metric: context_overlap, name_weight: 4}}
  - {{name: rouge_l, kind: lexical, metric: rouge_l}}
  - name: faith_llm
    kind: llm
    criterion: faithfulness
    provider: openai
    endpoint: http://127.0.0.1:{fake_port}/v1
    model: gpt-4o-mini
    api_key_env: ASSAY_TEST_LLM_KEY
    max_in_flight: 8
    timeout_ms: 10000
budget:
  daily_limit_eur: 5.0
# The judges' canary (docs/canary.md): 20 labelled dev events through every judge, 10 s after
# start; its verdicts must stay out of every statistic checked below.
canary:
  file: {q(canary_file)}
  every: 1h
  sample: 20
# The ratings' experiment is the events' app: routed through the A/B store (memory), decided
# and recorded (assay_ab_decision_*). The chi-square rule, whose p does not depend on the order
# the four partitions' ratings reach the store (the anytime-valid p does: it may not decide).
ab:
  decision: chi_square
  experiments:
    - {{name: qa, arms: [A, B]}}
tracking:
  window: 2000
  window_seconds: 3600
  min_samples: 20
  baseline_window: 100
  recent_window: 100
admin:
  listen: "127.0.0.1:{port}"
sinks:
  jsonl: {{path: {q(jsonl_path)}}}
"""
    with open(path, "w") as f:
        f.write(text)


def close(checks, what, expected, actual, tol=TOL):
    ok = actual is not None and expected is not None and abs(expected - actual) <= tol
    checks.rows.append((what, expected, actual, ok))


def run(args, workdir, checks):
    broker = assayd = fake = None
    assayd_log = os.path.join(workdir, "assayd.log")
    try:
        events, feedback, annotations, ratings = build_inputs(args.data)
        broker, bootstrap = start_broker(args.mock_broker, workdir)
        kcat_produce(bootstrap, EVENTS_TOPIC,
                     [(e["id"], json.dumps(e).encode()) for e in events], workdir)
        kcat_produce(bootstrap, FEEDBACK_TOPIC, feedback, workdir)
        log(f"produced {len(events)} events and {len(feedback)} feedback messages "
            f"({sum(len(a) for a in annotations.values())} annotations, {len(ratings)} ratings)")

        config_path = os.path.join(workdir, "assayd.yaml")
        jsonl_path = os.path.join(workdir, "judgments.jsonl")
        fake, fake_port = tp.start_fake_provider(args.assayd)
        port = tp.free_loopback_port()
        write_config(config_path, bootstrap, f"track-{os.getpid()}", port, jsonl_path, fake_port,
                     args.data)
        cc = subprocess.run([args.assayd, "--check-config", config_path], capture_output=True)
        if not checks.eq("assayd --check-config exit code", 0, cc.returncode):
            raise tp.TestFailure((cc.stdout + cc.stderr).decode())
        with open(assayd_log, "wb") as lf:
            assayd = subprocess.Popen([args.assayd, "--config", config_path],
                                      stdout=lf, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, ASSAY_TEST_LLM_KEY="sk-fake"),
                                      start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        n_feedback_valid = len(feedback) - 2

        def consumed(s):
            seen = (tp.metric(s, "assay_feedback_events_total") or 0) + \
                (tp.metric(s, "assay_feedback_pending") or 0)
            return (tp.metric(s, "assay_events_judged_total") == len(events) and
                    seen == n_feedback_valid + 2 and tp.metric(s, "assay_queue_depth") == 0 and
                    (tp.metric(s, "assay_canary_runs_total") or 0) >= 1)
        s, _ = tp.scrape_until(base, consumed, 120)
        if not consumed(s):
            raise tp.TestFailure("within 120 s /metrics never showed every event judged and "
                                 "every feedback message counted")

        # ---- Scores as written in the JSON Lines, per judge (every event is judged).
        scores = {j: {} for j in JUDGES + ["rouge_l", "faith_llm"]}
        variant_of = {e["id"]: e["variant"] for e in events}
        with open(jsonl_path) as f:
            for line in f:
                j = json.loads(line)
                for v in j["verdicts"]:
                    if v["score"] is not None:
                        scores[v["judge"]][j["id"]] = v["score"]

        def human_pairs(judge):
            return sum(len(ann) for eid, ann in annotations.items() if eid in scores[judge])

        # The score tracker's gauges reach their final values at its first refresh (once a
        # second) after the last judgment and feedback message, the A/B table's once its store
        # has counted every rating (its own thread; CI under ASan saw 171 of 202): the scrape
        # waits for them.
        rated = {"A": 0, "B": 0}
        for eid in ratings:
            rated["A" if variant_of[eid] == "A" else "B"] += 1

        def refreshed(s):
            return (tp.metric(s, "assay_judge_window_size", judge="overlap") ==
                    len(scores["overlap"]) and
                    all(tp.metric(s, "assay_judge_human_pairs", judge=judge) == human_pairs(judge)
                        for judge in JUDGES + ["faith_llm"]) and
                    tp.metric(s, "assay_ab_p_value") is not None and
                    tp.metric(s, "assay_ab_decision_p_value", experiment="qa") is not None and
                    all(tp.metric(s, "assay_ab_ratings", experiment="qa", variant=v) == n
                        for v, n in rated.items()))
        s, text = tp.scrape_until(base, refreshed, 30)
        assayd.send_signal(signal.SIGTERM)
        rc = assayd.wait(timeout=60)
        checks.eq("assayd exit code after SIGTERM", 0, rc)
        scrape = os.path.join(workdir, "metrics.txt")
        with open(scrape, "w") as f:
            f.write(text)
        with open(scrape, "rb") as f:
            pt = subprocess.run(["promtool", "check", "metrics"], stdin=f, capture_output=True)
        checks.eq("promtool check metrics", 0, pt.returncode)
        checks.true("no NaN in /metrics", "NaN" not in text)

        # Agreement between the two faithfulness judges.
        both = sorted(set(scores["overlap"]) & set(scores["overlap_names"]))
        x = [scores["overlap"][i] for i in both]
        y = [scores["overlap_names"][i] for i in both]
        labels = dict(criterion="faithfulness", judge_a="overlap", judge_b="overlap_names")
        checks.eq("assay_judge_agreement_pairs", len(both),
                  tp.metric(s, "assay_judge_agreement_pairs", **labels))
        tau = stats.kendalltau(x, y).statistic
        close(checks, "assay_judge_agreement_kendall_tau == scipy kendalltau", tau,
              tp.metric(s, "assay_judge_agreement_kendall_tau", **labels))
        close(checks, "assay_judge_agreement_spearman == scipy spearmanr",
              stats.spearmanr(x, y).statistic,
              tp.metric(s, "assay_judge_agreement_spearman", **labels))
        level = "high" if tau >= 0.7 else "moderate" if tau >= 0.4 else "low"
        checks.eq(f"assay_judge_agreement_level{{level={level}}}", 1,
                  tp.metric(s, "assay_judge_agreement_level", level=level, **labels))
        checks.eq("no agreement series for rouge_l (another criterion)", None,
                  tp.metric(s, "assay_judge_agreement_pairs", judge_b="rouge_l"))

        # The LLM judge (fake provider: 1 + FNV-1a(prompt) mod 4) agrees with the overlap judge
        # by chance only, but the statistic is computed the same way.
        both_llm = sorted(set(scores["overlap"]) & set(scores["faith_llm"]))
        llm_labels = dict(criterion="faithfulness", judge_a="overlap", judge_b="faith_llm")
        checks.eq("assay_judge_agreement_pairs{overlap, faith_llm}", len(both_llm),
                  tp.metric(s, "assay_judge_agreement_pairs", **llm_labels))
        close(checks, "assay_judge_agreement_kendall_tau{overlap, faith_llm} == scipy",
              stats.kendalltau([scores["overlap"][i] for i in both_llm],
                               [scores["faith_llm"][i] for i in both_llm]).statistic,
              tp.metric(s, "assay_judge_agreement_kendall_tau", **llm_labels))

        # Judge vs human: every (score, annotation) pair of a scored, annotated event.
        for judge in JUDGES + ["faith_llm"]:
            hx, hy = [], []
            for eid, ann in annotations.items():
                if eid in scores[judge]:
                    for v in ann.values():
                        hx.append(scores[judge][eid])
                        hy.append(v)
            checks.eq(f"assay_judge_human_pairs{{judge={judge}}}", len(hx),
                      tp.metric(s, "assay_judge_human_pairs", judge=judge))
            close(checks, f"assay_judge_human_spearman{{judge={judge}}} == scipy",
                  stats.spearmanr(hx, hy).statistic,
                  tp.metric(s, "assay_judge_human_spearman", judge=judge))

        # Annotators: crowd < expert alphabetically, so annotator_a = crowd.
        a = [ann["crowd"] for ann in annotations.values()]
        b = [ann["expert"] for ann in annotations.values()]
        for weighting, w in (("none", None), ("quadratic", "quadratic")):
            close(checks, f"assay_annotator_kappa{{weighting={weighting}}} == sklearn",
                  cohen_kappa_score(a, b, weights=w),
                  tp.metric(s, "assay_annotator_kappa", annotator_a="crowd",
                            annotator_b="expert", weighting=weighting))

        # Variants of the overlap judge.
        for variant in ("A", "B"):
            v = np.array([sc for i, sc in scores["overlap"].items() if variant_of[i] == variant])
            m, sd, n = v.mean(), v.std(ddof=1), len(v)
            q = stats.t.ppf(0.975, n - 1)  # Student's t at every n, cut to the scale [0, 1]
            lab = dict(judge="overlap", variant=variant)
            checks.eq(f"assay_score_n{{variant={variant}}}", n, tp.metric(s, "assay_score_n", **lab))
            close(checks, f"assay_score_mean{{variant={variant}}}", m,
                  tp.metric(s, "assay_score_mean", **lab))
            close(checks, f"assay_score_sd{{variant={variant}}}", sd,
                  tp.metric(s, "assay_score_sd", **lab))
            close(checks, f"assay_score_ci95_low{{variant={variant}}}",
                  max(0.0, m - q * sd / math.sqrt(n)), tp.metric(s, "assay_score_ci95_low", **lab))
            close(checks, f"assay_score_ci95_high{{variant={variant}}}",
                  min(1.0, m + q * sd / math.sqrt(n)), tp.metric(s, "assay_score_ci95_high", **lab))
        checks.true("assay_score_ci95_overlap{overlap, A, B} is 0 or 1",
                    tp.metric(s, "assay_score_ci95_overlap", judge="overlap", variant_a="A",
                              variant_b="B") in (0, 1))

        # A/B on ratings (experiment = app "qa").
        table = np.zeros((2, 5))
        for eid, stars in ratings.items():
            table[0 if variant_of[eid] == "A" else 1][stars - 1] += 1
        table = table[:, table.sum(axis=0) > 0]
        chi = stats.chi2_contingency(table, correction=False)
        close(checks, "assay_ab_p_value{experiment=qa} == scipy chi2_contingency", chi.pvalue,
              tp.metric(s, "assay_ab_p_value", experiment="qa"), tol=1e-12)
        decided = int(chi.pvalue < 0.05 and table.sum(axis=1).min() >= 30)
        checks.eq("assay_ab_decided{experiment=qa}", decided,
                  tp.metric(s, "assay_ab_decided", experiment="qa"))
        checks.eq("assay_ab_ratings{variant=A}", int(table[0].sum()),
                  tp.metric(s, "assay_ab_ratings", experiment="qa", variant="A"))

        # Feedback counts.
        n_ann = sum(len(a) for a in annotations.values())
        checks.eq("feedback annotations joined", n_ann,
                  tp.metric(s, "assay_feedback_events_total", kind="annotation", outcome="joined"))
        checks.eq("feedback ratings joined", len(ratings),
                  tp.metric(s, "assay_feedback_events_total", kind="rating", outcome="joined"))
        checks.eq("feedback invalid (not JSON, value 9)", 2,
                  tp.metric(s, "assay_feedback_events_total", outcome="invalid"))
        checks.eq("assay_feedback_pending (the rating whose event never came)", 1,
                  tp.metric(s, "assay_feedback_pending"))

        # Distribution of the overlap judge: window 2000 holds every score.
        ov = list(scores["overlap"].values())
        close(checks, "assay_judge_max_score_ratio{overlap}",
              sum(1 for v in ov if v == 1.0) / len(ov),
              tp.metric(s, "assay_judge_max_score_ratio", judge="overlap"))
        close(checks, "assay_score_window_mean{overlap}", float(np.mean(ov)),
              tp.metric(s, "assay_score_window_mean", judge="overlap"))
        checks.eq("assay_judge_window_size{overlap}", len(ov),
                  tp.metric(s, "assay_judge_window_size", judge="overlap"))
        # The canary's run (issue 31): every judge on its 20 labelled events, the LLM judge
        # through the fake provider; none of it in the windows checked above.
        checks.eq("canary: faith_llm scored its 20 events", 20,
                  tp.metric(s, "assay_canary_verdicts", judge="faith_llm", result="scored"))
        checks.true("canary: overlap's ROC AUC against the dev labels exported",
                    0 <= (tp.metric(s, "assay_canary_agreement", judge="overlap",
                                    statistic="roc_auc") or -1) <= 1)
        checks.true("assay_score_drift{overlap} is 0 or 1 and its p-value in [0, 1]",
                    tp.metric(s, "assay_score_drift", judge="overlap") in (0, 1) and
                    0 <= tp.metric(s, "assay_score_drift_p_value", judge="overlap") <= 1)
        checks.eq("assay_consumer_lag_messages summed (everything consumed)", 0,
                  tp.metric(s, "assay_consumer_lag_messages"))
        checks.eq("assay_consumer_lag_messages series (both topics' partitions)", 2 * PARTITIONS,
                  sum(1 for n, _, _ in s if n == "assay_consumer_lag_messages"))

        # Every expression of the rules and the dashboard refers to exported metrics.
        checker = os.path.join(REPO, "tests", "prometheus", "check_expressions.py")
        ce = subprocess.run(["/usr/bin/python3", checker, "--metrics-text", scrape,
                             "--rules", os.path.join(REPO, "config/prometheus/assay-rules.yml"),
                             "--dashboard",
                             os.path.join(REPO, "config/grafana/assay-dashboard.json")],
                            capture_output=True, text=True)
        if ce.returncode != 0:
            print(ce.stdout + ce.stderr, flush=True)
        checks.eq("rules and dashboard refer only to exported metrics (check_expressions.py)",
                  0, ce.returncode)
        return (f"{len(events)} events, {len(feedback)} feedback messages; "
                f"{len(both)} agreement pairs, tau-b {tau:.4f}")
    finally:
        tp.stop_process(assayd, "assayd")
        tp.stop_process(broker, "mock broker", term_timeout=10)
        tp.stop_process(fake, "fake provider", term_timeout=10)
        if checks.failed() and os.path.exists(assayd_log):
            print("---- assayd log (tail) ----\n" + tp.tail(assayd_log) + "\n----", flush=True)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_tracking", run))
