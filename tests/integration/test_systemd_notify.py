#!/usr/bin/python3
"""assayd speaks systemd's notification protocol (issue 10, "systemd"; sd_notify(3)).

The test plays systemd's part: a Unix datagram socket in NOTIFY_SOCKET, WATCHDOG_USEC=2 s and
WATCHDOG_PID in the environment, as systemd sets them for a `Type=notify` unit with
`WatchdogSec=2`. assayd runs on its embedded broker with --replay of the dev data. Asserts:
  - READY=1 arrives once, after /metrics answers (the admin endpoint listens), with a STATUS=
    line; STATUS= lines follow with the consumed and judged rates;
  - WATCHDOG=1 arrives every 0.5 s (a quarter of WatchdogSec) on average while the poll loop
    turns, never more than WatchdogSec apart (what systemd enforces), and never before the
    first turn;
  - after SIGTERM: STOPPING=1, then the process exits 0;
  - without NOTIFY_SOCKET nothing is sent and assayd runs as before (the other tests).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

WATCHDOG_USEC = 2_000_000


def run(args, workdir, checks):
    sock_path = os.path.join(workdir, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(0.2)
    admin = tp.free_loopback_port()
    url = f"http://127.0.0.1:{admin}"
    cfg = os.path.join(workdir, "c.yaml")
    with open(cfg, "w") as f:
        f.write(f"""kafka: {{brokers: embedded, topic: rag.events, group_id: notify}}
sampling: {{rate: 1.0}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(os.path.join(workdir, "j.jsonl"))}}}}}
""")
    messages = []  # (monotonic time, text)

    def receive(until):
        while time.monotonic() < until:
            try:
                data = sock.recv(4096)
            except socket.timeout:
                continue
            messages.append((time.monotonic(), data.decode()))

    env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC=str(WATCHDOG_USEC))
    log_path = os.path.join(workdir, "assayd.log")
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([args.assayd, "--config", cfg, "--replay", args.data],
                                  stdout=log, stderr=log, env=env, start_new_session=True)
    try:
        # WATCHDOG_PID is the main process' pid: systemd sets it; it is known only now, so the
        # test relies on sd_watchdog_enabled accepting its absence (it does, by design).
        started = time.monotonic()
        deadline = started + 30
        while time.monotonic() < deadline and not any("READY=1" in m for _, m in messages):
            receive(time.monotonic() + 0.5)
        ready_at = next((t for t, m in messages if "READY=1" in m), None)
        checks.true("READY=1 received within 30 s", ready_at is not None)
        checks.eq("/metrics answers once READY=1 was sent", 200, tp.http_get(url + "/metrics")[0])
        ready_msg = next((m for _, m in messages if "READY=1" in m), "")
        checks.true("READY=1 carries a STATUS= line", "\nSTATUS=consumed " in ready_msg, ready_msg)
        def statuses_after_ready():
            return [m for _, m in messages if m.startswith("STATUS=") and "READY=1" not in m]
        # Two status periods (5 s) after READY=1: about 10 s, or 30 s on a stalled machine.
        deadline = time.monotonic() + 30
        while len(statuses_after_ready()) < 2 and time.monotonic() < deadline:
            receive(time.monotonic() + 0.5)
        statuses = statuses_after_ready()
        tp.log(f"status lines: {statuses}")
        checks.true("STATUS= lines after READY (every 5 s)", len(statuses) >= 2, str(len(statuses)))
        checks.true("a STATUS= line gives rates and readiness",
                    any("judged" in s and "/s" in s and ("ready" in s) for s in statuses),
                    str(statuses[-1:]))
        pings = [t for t, m in messages if m == "WATCHDOG=1"]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        mean = (pings[-1] - pings[0]) / len(gaps) if gaps else 99
        tp.log(f"{len(pings)} watchdog pings, mean gap {mean:.2f} s, largest "
               f"{max(gaps, default=0):.2f} s")
        checks.true("WATCHDOG=1 pings over two status periods", len(pings) >= 15, str(len(pings)))
        # The test stamps a ping when it reads it: a busy machine that delays the test (or
        # assayd) stretches one gap, not the mean.
        checks.true("pings every WatchdogSec/4 (0.5 s) on average, within 20 %", mean <= 0.6,
                    f"{mean:.2f} s")
        checks.true("no gap between pings of WatchdogSec (2 s) or more: systemd's limit",
                    max(gaps, default=99) < 2.0, f"{max(gaps, default=99):.2f} s")
        checks.eq("READY=1 sent once", 1, sum(1 for _, m in messages if "READY=1" in m))
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
        receive(time.monotonic() + 0.5)
        checks.eq("exit code after SIGTERM", 0, rc)
        checks.true("STOPPING=1 after SIGTERM", any("STOPPING=1" in m for _, m in messages))
        return f"READY, {len(statuses)} STATUS lines, {len(pings)} watchdog pings, STOPPING"
    finally:
        tp.stop_process(daemon, "assayd")
        sock.close()


if __name__ == "__main__":
    sys.exit(tp.run_script("test_systemd_notify", run))
