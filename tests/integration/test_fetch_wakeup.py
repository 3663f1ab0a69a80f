#!/usr/bin/python3
"""librdkafka's fetchers are woken when the consumer drains its pre-fetch queue.

librdkafka 2.0 (Debian 12) stops fetching once its pre-fetch queue holds
queued.max.messages.kbytes and looks again only when something wakes its broker thread, at the
latest after a second (confluentinc/librdkafka#2879). assayd wakes it (a ListOffsets request
to each leader) each time half the queue was consumed (sources/kafka.cpp, FetchNudge).

assayd replays 20 copies of the dev events (ids made unique: 10,060 events, about 30 MB) on its
embedded broker (16 partitions: 1.9 MB each, well within the mock cluster's 5 MB a partition)
with a 128 KB pre-fetch queue and 8 KB per partition and fetch
(kafka.properties queued.max.messages.kbytes, max.partition.fetch.bytes), sampling 1.0, three
lexical judges on one worker behind a queue of 100: a consumer slower than its fetcher, whose
pre-fetch queue refills a few hundred times. Checks: every event consumed and judged, the
wake-ups counted in the summary (> 0), and consumption under 6 s: with the wake-up it took
0.6 s, without it 16.1 s (the same run, the wake-up disabled, 2026-12-05).
Invoked by ctest with the same arguments as test_pipeline.py (--mock-broker is not used).
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile


COPIES = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assayd", required=True)
    ap.add_argument("--mock-broker")
    ap.add_argument("--data", required=True)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="assay_fetch_wakeup_")
    try:
        # COPIES copies of the dev events, ids made unique: about 30 MB.
        data = os.path.join(tmp, "events.jsonl")
        events = 0
        with open(args.data) as f, open(data, "w") as out:
            lines = [json.loads(line) for line in f if line.strip()]
            for k in range(COPIES):
                for e in lines:
                    e = dict(e, id=f"{e['id']}-{k}")
                    out.write(json.dumps(e) + "\n")
                    events += 1
        jsonl = os.path.join(tmp, "j.jsonl")
        config = os.path.join(tmp, "c.yaml")
        with open(config, "w") as f:
            f.write(f"""kafka:
  brokers: embedded
  topic: fw.events
  group_id: fw
  partitions: 16
  properties: {{queued.max.messages.kbytes: "128", max.partition.fetch.bytes: "8192"}}
sampling: {{rate: 1.0}}
limits: {{queue_capacity: 100, workers: 1}}
judges:
  - {{name: rouge_l, kind: lexical, metric: rouge_l}}
  - {{name: bleu, kind: lexical, metric: bleu}}
  - {{name: token_f1, kind: lexical, metric: token_f1}}
admin: {{listen: "127.0.0.1:{free_port()}"}}
sinks: {{jsonl: {{path: "{jsonl}"}}}}
""")
        proc = subprocess.run([args.assayd, "--config", config, "--replay", data,
                               "--exit-when-idle", "2"], capture_output=True, text=True,
                              timeout=240)
        log = proc.stderr
        failures = []

        def check(name, ok, detail):
            print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")
            if not ok:
                failures.append(name)

        check("exit code", proc.returncode == 0, proc.returncode)
        stopped = re.search(r"stopped: consumed (\d+), sampled (\d+), invalid (\d+).*, judged "
                            r"(\d+), dropped (\d+)", log)
        consumption = re.search(r"consumption: (\d+) messages in ([\d.]+) s .*fetchers woken "
                                r"(\d+) time", log)
        if not stopped or not consumption:
            print(log[-3000:])
            print("FAIL: no 'stopped:' or 'consumption:' line in the log")
            return 1
        consumed, sampled, _, judged, dropped = map(int, stopped.groups())
        seconds, wakeups = float(consumption.group(2)), int(consumption.group(3))
        check("consumed == events replayed", consumed == events, f"{consumed} vs {events}")
        check("judged == consumed, nothing dropped", judged == consumed and dropped == 0,
              f"judged {judged}, dropped {dropped}")
        check("fetchers woken", wakeups > 0, wakeups)
        # librdkafka alone waits up to a second before a refill (16.1 s); woken, 0.6 s.
        check("consumption under 6 s", seconds < 6, f"{seconds:.1f} s")
        if failures:
            print(log[-3000:])
            return 1
        print(f"PASSED: {consumed} events in {seconds:.1f} s, fetchers woken {wakeups} times")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
