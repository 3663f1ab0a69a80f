#!/usr/bin/python3
"""assayd on its embedded broker with --replay and --replay-feedback (no external Kafka).

The dev events (with variants) and their feedback (tests/integration/test_tracking.py builds
both) are produced by assayd itself into its in-process broker; the test then checks on /metrics
that every valid feedback message was joined, the invalid ones counted, and the A/B p-value is
scipy's. Also: --replay-feedback without kafka.feedback_topic is a configuration error (exit 2).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import subprocess
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402
import test_tracking as tt  # noqa: E402


def run(args, workdir, checks):
    events, feedback, annotations, ratings = tt.build_inputs(args.data)
    events_path = os.path.join(workdir, "events.jsonl")
    feedback_path = os.path.join(workdir, "feedback.jsonl")
    with open(events_path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    with open(feedback_path, "wb") as f:
        for _, value in feedback:
            f.write(value + b"\n")
    port = tp.free_loopback_port()
    config = os.path.join(workdir, "assayd.yaml")
    with open(config, "w") as f:
        f.write(f"""kafka: {{brokers: embedded, topic: ev, feedback_topic: fb, partitions: 4}}
sampling: {{rate: 1.0}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
admin: {{listen: "127.0.0.1:{port}"}}
""")
    # What /metrics must show: every rating and annotation joined, and scipy's p-value.
    n_ann = sum(len(a) for a in annotations.values())
    variant_of = {e["id"]: e["variant"] for e in events}
    table = np.zeros((2, 5))
    for eid, stars in ratings.items():
        table[0 if variant_of[eid] == "A" else 1][stars - 1] += 1
    table = table[:, table.sum(axis=0) > 0]
    p = stats.chi2_contingency(table, correction=False).pvalue

    def final(s):
        got = tp.metric(s, "assay_ab_p_value", experiment="qa")
        return (tp.metric(s, "assay_feedback_events_total", kind="annotation",
                          outcome="joined") == n_ann and
                tp.metric(s, "assay_feedback_events_total", kind="rating",
                          outcome="joined") == len(ratings) and
                tp.metric(s, "assay_feedback_events_total", outcome="invalid") == 2 and
                got is not None and abs(got - p) <= 1e-12)

    log_path = os.path.join(workdir, "assayd.log")
    with open(log_path, "wb") as lf:
        proc = subprocess.Popen([args.assayd, "--config", config, "--replay", events_path,
                                 "--replay-feedback", feedback_path],
                                stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        s, _ = tp.scrape_until(f"http://127.0.0.1:{port}", final, 90)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        tp.stop_process(proc, "assayd")
    checks.eq("assayd exit code after SIGTERM", 0, rc)
    if not s:
        print(tp.tail(log_path))
        raise tp.TestFailure("/metrics never answered")
    checks.eq("annotations joined", n_ann,
              tp.metric(s, "assay_feedback_events_total", kind="annotation", outcome="joined"))
    checks.eq("ratings joined", len(ratings),
              tp.metric(s, "assay_feedback_events_total", kind="rating", outcome="joined"))
    checks.eq("invalid feedback", 2, tp.metric(s, "assay_feedback_events_total", outcome="invalid"))
    got = tp.metric(s, "assay_ab_p_value", experiment="qa")
    checks.true("assay_ab_p_value == scipy chi2_contingency", got is not None and
                abs(got - p) <= 1e-12, f"{got} vs {p}")
    with open(log_path) as f:
        log = f.read()
    checks.true("the log says how many feedback messages were replayed",
                f"produced {len(feedback)} feedback message(s)" in log)

    # Without kafka.feedback_topic: exit 2, saying what is missing.
    with open(config, "w") as f:
        f.write("kafka: {brokers: embedded}\njudges:\n  - {name: r, kind: lexical, metric: "
                f"rouge_l}}\nadmin: {{listen: \"127.0.0.1:{tp.free_loopback_port()}\"}}\n")
    r = subprocess.run([args.assayd, "--config", config, "--replay-feedback", feedback_path],
                       capture_output=True, text=True, timeout=60)
    checks.eq("--replay-feedback without feedback_topic: exit code", 2, r.returncode)
    checks.true("... and the message names kafka.feedback_topic",
                "--replay-feedback needs kafka.feedback_topic" in r.stderr, r.stderr[-300:])
    return f"{len(events)} events and {len(feedback)} feedback messages replayed"


if __name__ == "__main__":
    sys.exit(tp.run_script("test_replay_feedback", run))
