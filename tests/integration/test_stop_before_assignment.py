#!/usr/bin/python3
"""A stop during a slow rebalance, before the first assignment, ends cleanly (exit 0), with the
cooperative-sticky assignor the example configuration recommends.

librdkafka before 2.3.0 (Debian 12: 2.0.2) aborts in rd_kafka_destroy() when a
cooperative-sticky consumer is destroyed after its JoinGroup answer but before its first
assignment (confluentinc/librdkafka#4312); an operator trial saw `systemctl stop` end in SIGABRT
(exit 134). The window is made wide and reproducible: instance A joins the group and is killed
with SIGKILL, so the coordinator holds the next rebalance until A's session times out (6 s
here); instance B joins meanwhile and is stopped with SIGTERM at several moments around that
timeout. Asserts: every stop exits 0, and at least one of them happened before B's first
assignment (else the test proves nothing; the log line about the kept handle says so).
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

SESSION_MS = 6000
DELAYS_S = (5.5, 7.0)  # after B starts; A's session ends about 6 s after its kill


def start(args, workdir, name, bootstrap):
    admin = tp.free_loopback_port()
    props = {"partition.assignment.strategy": "cooperative-sticky",
             "session.timeout.ms": str(SESSION_MS), "heartbeat.interval.ms": "1000"}
    kafka = {"brokers": bootstrap, "topic": tp.EVENTS_TOPIC, "group_id": "stop-early",
             "properties": props}
    cfg = os.path.join(workdir, f"{name}.yaml")
    with open(cfg, "w") as f:
        f.write(f"kafka: {json.dumps(kafka)}\n"
                "judges:\n  - {name: overlap, kind: lexical, metric: context_overlap}\n"
                f'admin: {{listen: "127.0.0.1:{admin}"}}\n')
    log_path = os.path.join(workdir, f"{name}.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([args.assayd, "--config", cfg], stdout=log, stderr=log,
                                start_new_session=True)
    return proc, f"http://127.0.0.1:{admin}", log_path


def run(args, workdir, checks):
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        procs.append((broker, "broker"))
        early = 0
        for i, delay in enumerate(DELAYS_S):
            a, a_url, _ = start(args, workdir, f"a{i}", bootstrap)
            procs.append((a, f"a{i}"))
            tp.wait_for(f"a{i} assigned", lambda: tp.http_get(a_url + "/readyz")[0] == 200, 30)
            a.send_signal(signal.SIGKILL)
            a.wait(timeout=10)
            b, _, b_log = start(args, workdir, f"b{i}", bootstrap)
            procs.append((b, f"b{i}"))
            time.sleep(delay)
            b.send_signal(signal.SIGTERM)
            rc = b.wait(timeout=60)
            with open(b_log) as f:
                log = f.read()
            kept = "the consumer had no assignment yet" in log
            early += kept
            tp.log(f"stop {delay} s after start: exit {rc}, before the first assignment: {kept}")
            checks.eq(f"SIGTERM {delay} s after joining: exit code", 0, rc)
            checks.true(f"SIGTERM {delay} s: no abort", "Assertion" not in log, log[-1500:])
            # B left the group (close); the next round starts without it.
        checks.true("at least one stop came before the first assignment", early > 0, early)
        return f"{len(DELAYS_S)} stops around the rebalance, {early} before the first assignment"
    finally:
        for p, name in reversed(procs):
            if p.poll() is None:
                tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_stop_before_assignment", run, tp.common_args()))
