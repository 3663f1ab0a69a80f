#!/usr/bin/python3
"""A SIGHUP before assayd is running is handled, never fatal (issue 28, item 10).

SIGHUP's default action ends a process; assayd caught it only once the configuration was
loaded and the logger made, so a reload sent in the first milliseconds (a config-management
tool, a `systemctl reload` racing a restart) killed it. The handlers are now installed before
main(), with SA_RESTART so that a blocking open or read goes on.

Deterministic window: `--replay` names a FIFO, so assayd blocks in open(2) of it, in main(), after
the configuration is loaded and before the service runs (the kernel shows the wait as
`wait_for_partner` in /proc/PID/wchan). SIGHUP is sent there. Then a writer gives the FIFO 20 dev
events and assayd (embedded broker, --exit-when-idle) judges them and exits.
Asserts: assayd was not killed by the signal and exits 0; the 20 events are judged (JSON Lines;
a writer that finds assayd still waiting may give the file twice, so ids are compared as a set);
the early SIGHUP was applied as a reload once the pipeline ran.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

N = 20


def wchan(pid):
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip()
    except OSError:
        return ""


def run(args, workdir, checks):
    dev = tp.load_dev_events(args.data)[:N]
    events = [e for e, _ in dev]
    lines = b"".join(line + b"\n" for _, line in dev)
    fifo = os.path.join(workdir, "replay.fifo")
    os.mkfifo(fifo)
    jsonl = os.path.join(workdir, "j.jsonl")
    config = os.path.join(workdir, "assayd.yaml")
    with open(config, "w") as f:
        f.write("kafka: {brokers: embedded, topic: ev, partitions: 1}\n"
                "sampling: {rate: 1.0}\n"
                "judges:\n  - {name: overlap, kind: lexical, metric: context_overlap}\n"
                f"admin: {{listen: \"127.0.0.1:{tp.free_loopback_port()}\"}}\n"
                f"sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}\n")
    log_path = os.path.join(workdir, "assayd.log")
    with open(log_path, "wb") as lf:
        proc = subprocess.Popen([args.assayd, "--config", config, "--replay", fifo,
                                 "--exit-when-idle", "2"],
                                stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    fed = []

    def feed():
        # assayd opens the FIFO twice (a check that it can read the file, then the replay):
        # each open that waits for a writer gets the whole file once.
        while proc.poll() is None:
            if wchan(proc.pid) != "wait_for_partner":
                time.sleep(0.01)  # polling a condition: assayd is not waiting for a writer
                continue
            fd = os.open(fifo, os.O_WRONLY)
            try:
                os.write(fd, lines)
            except BrokenPipeError:
                pass
            finally:
                os.close(fd)

    try:
        tp.wait_for("assayd blocked opening the --replay FIFO",
                    lambda: wchan(proc.pid) == "wait_for_partner" or proc.poll() is not None, 30)
        checks.eq("assayd alive before the signal", None, proc.poll())
        proc.send_signal(signal.SIGHUP)
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        rc = proc.wait(timeout=120)
    finally:
        tp.stop_process(proc, "assayd")
        # Unblock the feeder if it waits for a reader that will not come.
        try:
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
    checks.eq("exit code (-1 = killed by SIGHUP)", 0, rc)
    judged = []
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            judged = [json.loads(line)["id"] for line in f if line.strip()]
    checks.eq("events judged (ids, and how many judgments)", (sorted(events), True),
              (sorted(set(judged)), len(judged) >= N))
    with open(log_path) as f:
        log = f.read()
    checks.true("the early SIGHUP applied as a reload once running",
                "SIGHUP: reopening the sinks' files, reloading" in log, tp.tail(log_path))
    return f"SIGHUP in main() before the service ran: exit {rc}, {len(judged)} of {N} judged"


if __name__ == "__main__":
    sys.exit(tp.run_script("test_early_sighup", run))
