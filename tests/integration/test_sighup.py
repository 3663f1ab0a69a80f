#!/usr/bin/python3
"""SIGHUP reopens the JSON Lines file, as logrotate needs, and reloads the configuration
(issue 10, "Signals").

assayd consumes the dev events at rate 1.0 from a broker process. After the first half is
judged, the test moves the JSON Lines file away (logrotate's `create` mode) and edits the
configuration three times, with a SIGHUP after each:
  1. an invalid file (sampling rate 2): rejected with FILE:LINE:COL in the log, nothing
     changes (assay_config_reloads_total{result="rejected"} 1);
  2. sampling rate 0.5: applied (result="applied" 1);
  3. the same plus a tracking change: valid, the tracking part needs a restart
     (result="restart_needed" 1, the log names `tracking`).
Then the second half is produced. Asserts: assayd is still running (SIGHUP used to end it with
exit 129), the moved file holds exactly the first half, the new file (created 0640) exactly the
second half's events sampled at 0.5 (XXH3-64 of the id < 0.5 × 2^64, computed here), and
SIGTERM then stops it with exit code 0.
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
        daemon, url, jsonl, log_path = tp.start_overlap_daemon(args.assayd, workdir, bootstrap,
                                                               "hup")
        procs.append((daemon, "assayd"))

        def judged():
            return tp.judged_count(url)

        def reloads(result):
            status, text = tp.http_get(url + "/metrics")
            return tp.metric(tp.parse_metrics(text), "assay_config_reloads_total",
                             result=result) if status == 200 else None

        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events[:half])
        tp.wait_for("the first half judged", lambda: judged() == half, 30)
        os.rename(jsonl, jsonl + ".1")
        cfg = os.path.join(workdir, "c.yaml")
        with open(cfg) as f:
            original = f.read()
        assert "sampling: {rate: 1.0}" in original

        def hup(text, result, count):
            with open(cfg, "w") as f:
                f.write(text)
            daemon.send_signal(signal.SIGHUP)
            tp.wait_for(f"reload #{count} {result}", lambda: reloads(result) == count, 15)

        def gauge(name):
            status, text = tp.http_get(url + "/metrics")
            return tp.metric(tp.parse_metrics(text), name) if status == 200 else None

        hup(original.replace("rate: 1.0", "rate: 2"), "rejected", 1)
        checks.eq("after the rejected reload: last_reload_successful, restart_needed", (0, 0),
                  (gauge("assay_config_last_reload_successful"),
                   gauge("assay_config_restart_needed")))
        checks.true("the file reopened on SIGHUP", os.path.exists(jsonl))
        checks.true("assayd runs on after SIGHUP", daemon.poll() is None, daemon.poll())
        halved = original.replace("rate: 1.0", "rate: 0.5")
        hup(halved, "applied", 1)
        checks.eq("after the applied reload: last_reload_successful", 1,
                  gauge("assay_config_last_reload_successful"))
        hup(halved + "tracking: {window: 100}\n", "restart_needed", 1)
        checks.eq("after the restart-needed reload: restart_needed", 1,
                  gauge("assay_config_restart_needed"))
        checks.eq("reloads: rejected, applied, restart_needed",
                  (1, 1, 1), (reloads("rejected"), reloads("applied"), reloads("restart_needed")))
        with open(log_path) as f:
            log = f.read()
        checks.true("the rejection gives FILE:LINE:COL and the key",
                    f"{cfg}:2:" in log and "sampling.rate" in log, log[-2000:])
        checks.true("the restart-needed part is named",
                    "changed tracking: a reload does not apply that" in log, log[-2000:])
        sampled_second = {e for e, _ in events[half:] if tp.sampled(e, 0.5)}
        tp.produce_keyed(bootstrap, tp.EVENTS_TOPIC, events[half:])
        tp.wait_for("the second half's sample judged",
                    lambda: judged() == half + len(sampled_second), 30)
        daemon.send_signal(signal.SIGTERM)
        checks.eq("exit code after SIGTERM", 0, daemon.wait(timeout=60))
        first, second = ids_in(jsonl + ".1"), ids_in(jsonl)
        want_first, want_second = {e for e, _ in events[:half]}, sampled_second
        checks.eq("the moved file holds the first half, once each (lines, missing)",
                  (len(want_first), 0), (len(first), len(want_first - set(first))))
        checks.eq("the new file holds the second half's sample at 0.5, once each (lines, missing)",
                  (len(want_second), 0), (len(second), len(want_second - set(second))))
        checks.eq("the new file's mode", "0o640", oct(stat.S_IMODE(os.stat(jsonl).st_mode)))
        return f"SIGHUP: {len(first)} judgments in the moved file, {len(second)} in the new one"
    finally:
        for p, name in reversed(procs):
            tp.stop_process(p, name)


if __name__ == "__main__":
    sys.exit(tp.run_script("test_sighup", run, tp.common_args()))
