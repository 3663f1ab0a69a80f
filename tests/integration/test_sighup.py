#!/usr/bin/python3
"""SIGHUP reopens the JSON Lines file, as logrotate needs (issue 10, "Signals").

assayd consumes the dev events at rate 1.0 from a broker process. After the first half is
judged, the test moves the JSON Lines file away (logrotate's `create` mode), sends SIGHUP,
then produces the second half. Asserts: assayd is still running (SIGHUP used to end it with
exit 129), the moved file holds exactly the first half, the new file (created 0640) exactly the
second half, and SIGTERM then stops it with exit code 0.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402


def ids_in(path):
    with open(path) as f:
        return [json.loads(line)["id"] for line in f]


def run(args, workdir, checks):
    procs = []
    try:
        broker, bootstrap = tp.start_broker(args.mock_broker, workdir)
        procs.append((broker, "broker"))
        events = tp.load_dev_events(args.data)
        half = len(events) // 2
        daemon, url, jsonl, _ = tp.start_overlap_daemon(args.assayd, workdir, bootstrap, "hup")
        procs.append((daemon, "assayd"))

        def judged():
            return tp.judged_count(url)

        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events[:half])
        tp.wait_for("the first half judged", lambda: judged() == half, 30)
        os.rename(jsonl, jsonl + ".1")
        daemon.send_signal(signal.SIGHUP)
        tp.wait_for("the file reopened", lambda: os.path.exists(jsonl), 10)
        checks.true("assayd runs on after SIGHUP", daemon.poll() is None, daemon.poll())
        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events[half:])
        tp.wait_for("the second half judged", lambda: judged() == len(events), 30)
        daemon.send_signal(signal.SIGTERM)
        checks.eq("exit code after SIGTERM", 0, daemon.wait(timeout=60))
        first, second = ids_in(jsonl + ".1"), ids_in(jsonl)
        want_first, want_second = {e for e, _ in events[:half]}, {e for e, _ in events[half:]}
        checks.eq("the moved file holds the first half, once each (lines, missing)",
                  (len(want_first), 0), (len(first), len(want_first - set(first))))
        checks.eq("the new file holds the second half, once each (lines, missing)",
                  (len(want_second), 0), (len(second), len(want_second - set(second))))
        checks.eq("the new file's mode", "0o640", oct(stat.S_IMODE(os.stat(jsonl).st_mode)))
        return f"SIGHUP: {len(first)} judgments in the moved file, {len(second)} in the new one"
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_sighup", run, tp.common_args()))
