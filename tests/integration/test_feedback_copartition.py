#!/usr/bin/python3
"""Feedback is joined on the instance that judged its event (issue 29: with the partitions of
the two topics spread over two instances, 40 annotations were never joined and nothing said
so). Two consumer groups of two assayd instances each, on one broker process, both with the
range assignor:

  - `equal`: the events topic and a feedback topic of the same partition count (6): range gives
    partition p of both topics to one instance. Both instances log "kafka: feedback
    co-partitioned" and export assay_feedback_copartitioned 1.
  - `unequal`: a feedback topic of 4 partitions: an event keyed k and its feedback keyed k land
    on partitions of different numbers. Both instances warn that feedback is not co-partitioned,
    naming the partitions, and export assay_feedback_copartitioned 0.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

EQUAL, UNEQUAL = "copart.feedback6", "copart.feedback4"


def run(args, workdir, checks):
    broker, bootstrap = tp.start_broker(
        args.mock_broker, workdir,
        [f"{tp.EVENTS_TOPIC}:{tp.EVENTS_PARTITIONS}", f"{EQUAL}:{tp.EVENTS_PARTITIONS}",
         f"{UNEQUAL}:4"])
    daemons = {}
    try:
        for group, feedback in (("equal", EQUAL), ("unequal", UNEQUAL)):
            for name in ("a", "b"):
                d = os.path.join(workdir, f"{group}-{name}")
                os.makedirs(d)
                kafka = {"feedback_topic": feedback,
                         "properties": {"partition.assignment.strategy": "range",
                                        "session.timeout.ms": "6000",
                                        "heartbeat.interval.ms": "500"}}
                daemons[(group, name)] = tp.start_overlap_daemon(
                    args.assayd, d, bootstrap, f"copart-{group}-{os.getpid()}", kafka)

        def value(key):
            status, text = tp.http_get(daemons[key][1] + "/metrics")
            return tp.metric(tp.parse_metrics(text), "assay_feedback_copartitioned") \
                if status == 200 else None

        def logged(key, text):
            with open(daemons[key][3], errors="replace") as f:
                return text in f.read()

        # The check runs 10 s after the assignment settles (a cooperative rebalance takes
        # two steps); the first assignment takes about 3 s.
        tp.wait_for("both groups' instances to check their assignment", lambda: all(
            logged(k, "kafka: feedback co-partitioned") for k in daemons if k[0] == "equal") and
            all(value(k) == 0 for k in daemons if k[0] == "unequal"), 60)
        for name in ("a", "b"):
            checks.eq(f"equal partition counts, range: instance {name} co-partitioned", 1.0,
                      value(("equal", name)))
            checks.true(f"unequal partition counts: instance {name} warns, naming the partitions",
                        logged(("unequal", name), "kafka: feedback is not co-partitioned with the "
                               "events on this instance: it consumes events partitions [") and
                        logged(("unequal", name), f"of {tp.EVENTS_PARTITIONS} and feedback "
                               "partitions ["))
        return "co-partitioning reported on both instances of both groups"
    finally:
        for key, d in daemons.items():
            tp.stop_process(d[0], f"assayd {key}")
        tp.stop_process(broker, "mock broker")


if __name__ == "__main__":
    sys.exit(tp.run_script("feedback_copartition", run))
