#!/usr/bin/python3
"""The admin endpoint survives running out of file descriptors.

assayd runs with RLIMIT_NOFILE 256 (embedded broker, one cheap judge). The test opens 300
connections to its admin port and holds them, so that accept() fails with EMFILE; then it
closes them all. The endpoint must answer /metrics and /healthz again within 10 s (it used to
stop accepting for good, silently), the log must say that accept failed, and assayd must stop
cleanly on SIGTERM (exit 0).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import os
import resource
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402


def run(args, workdir, checks):
    admin = tp.free_loopback_port()
    cfg = os.path.join(workdir, "c.yaml")
    with open(cfg, "w") as f:
        f.write(f"""kafka: {{brokers: embedded, topic: rag.events, group_id: fds}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
admin: {{listen: "127.0.0.1:{admin}"}}
""")
    log_path = os.path.join(workdir, "assayd.log")
    limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))  # noqa: E731
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log, stderr=log,
                                  preexec_fn=limit, start_new_session=True)
    held = []
    try:
        url = f"http://127.0.0.1:{admin}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and tp.http_get(url + "/healthz")[0] != 200:
            time.sleep(0.1)
        checks.eq("/healthz before", 200, tp.http_get(url + "/healthz")[0])
        for _ in range(300):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", admin))
            except OSError:
                s.close()
                continue
            held.append(s)

        def accept_failed():
            with open(log_path, errors="replace") as f:
                return "admin: accept failed" in f.read()
        # The server meets EMFILE on one of its next accepts and says so.
        tp.wait_for("the admin server's accept failing", accept_failed, 30)
        tp.log(f"{len(held)} connections held")
        for s in held:
            s.close()
        held = []
        status, body = 0, ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            status, body = tp.http_get(url + "/metrics", timeout=1)
            if status == 200:
                break
            time.sleep(0.2)
        checks.eq("/metrics answers again after the descriptors are back", 200, status)
        checks.true("the exposition is whole", "assay_build_info" in body, body[:200])
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
        checks.eq("exit code after SIGTERM", 0, rc)
        with open(log_path, errors="replace") as f:
            text = f.read()
        checks.true("the log says accept failed and is retried",
                    "admin: accept failed" in text and "retrying" in text, tp.tail(log_path))
    finally:
        for s in held:
            s.close()
        tp.stop_process(daemon, "assayd")
    return "the admin endpoint answers again once file descriptors are free"


if __name__ == "__main__":
    sys.exit(tp.run_script("test_admin_fds", run))
