#!/usr/bin/python3
"""A budget store that answers after 2 s does not slow consumption.

The budget ledger's Redis round trips run on the ledger's own thread (judges/llm/ledger.hpp),
never on a judge worker or the poll thread. Two runs of assayd on the same 2,012 events (the
dev data four times, new ids), each with a local judge and an LLM judge on every event (fake
provider, answers at once), budget.store on a real redis-server:
  1. direct: Redis answers at once;
  2. slow: through a proxy that holds every reply of Redis for 2 s (command_timeout_ms=3000 in
     the store URL, so every reservation waits its 2 s and succeeds: the LLM calls wait).
For each run the test reads /metrics every 0.1 s and measures the rate at which events are
consumed and get their local verdict (first consumed message to the last local verdict). The
slow run must finish within 60 s (measured 3.3 s at most); a worker that waited for Redis would
take about 1 s per event (over 1,000 s for the lot).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

COPIES = 4
DELAY_S = 2.0


class DelayingProxy:
    """Forwards loopback TCP to `target_port`; every reply chunk reaches the client DELAY_S
    after the server sent it (requests go through at once)."""

    def __init__(self, target_port):
        self.target = target_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(client, server, 0.0), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, DELAY_S),
                             daemon=True).start()

    @staticmethod
    def _pump(src, dst, delay):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if delay:
                    time.sleep(delay)  # in order: each chunk waits its full delay
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.listener.close()


def write_events(path, data):
    n = 0
    with open(data) as src, open(path, "w") as out:
        lines = [json.loads(l) for l in src if l.strip()]
        for c in range(COPIES):
            for e in lines:
                out.write(json.dumps(dict(e, id=f"{e['id']}#slow{c}")) + "\n")
                n += 1
    return n


def run_once(args, workdir, name, store_port, fake_port, events, n):
    admin = tp.free_loopback_port()
    cfg = os.path.join(workdir, f"{name}.yaml")
    with open(cfg, "w") as f:
        f.write(f"""kafka: {{brokers: embedded, topic: rag.events, group_id: {name}, partitions: 6}}
sampling: {{rate: 1.0}}
limits: {{drain_timeout_ms: 3000}}
budget: {{daily_limit_eur: 5.0, store: "redis://127.0.0.1:{store_port}/0?command_timeout_ms=3000"}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
  - {{name: f, kind: llm, criterion: faithfulness, endpoint: "http://127.0.0.1:{fake_port}/v1", model: gpt-4o-mini}}
admin: {{listen: "127.0.0.1:{admin}"}}
""")
    log_path = os.path.join(workdir, f"{name}.log")
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([args.assayd, "--config", cfg, "--replay", events],
                                  stdout=log, stderr=log, start_new_session=True)
    first = last = None
    samples = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and daemon.poll() is None:
            status, text = tp.http_get(f"http://127.0.0.1:{admin}/metrics", timeout=1)
            now = time.monotonic()
            if status == 200:
                samples = tp.parse_metrics(text)
                consumed = tp.metric(samples, "assay_events_consumed_total") or 0
                local = tp.metric(samples, "assay_judge_runs_total", judge="overlap") or 0
                if consumed and first is None:
                    first = now
                if local >= n:
                    last = now
                    break
            time.sleep(0.1)
        llm_in = tp.metric(samples, "assay_judge_runs_total", judge="f") or 0
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(timeout=60)
    finally:
        tp.stop_process(daemon, f"assayd ({name})")
    if first is None or last is None:
        raise tp.TestFailure(f"{name}: the {n} events did not all get a local verdict; log:\n"
                             f"{tp.tail(log_path)}")
    took = max(last - first, 0.1)
    tp.log(f"{name}: {n} events consumed and judged locally in {took:.2f} s "
           f"({n / took:.0f} events/s); LLM verdicts in by then: {llm_in}; exit {rc}")
    return n / took, took, rc, llm_in


def run(args, workdir, checks):
    events = os.path.join(workdir, "events.jsonl")
    n = write_events(events, args.data)
    redis, redis_port = tp.start_redis(workdir)
    fake, fake_port = tp.start_fake_provider(args.assayd)
    proxy = DelayingProxy(redis_port)
    try:
        fast_rate, _, fast_rc, _ = run_once(args, workdir, "direct", redis_port, fake_port,
                                            events, n)
        slow_rate, slow_took, slow_rc, slow_llm_in = run_once(args, workdir, "slow", proxy.port,
                                                           fake_port, events, n)
    finally:
        proxy.close()
        tp.stop_process(fake, "fake provider")
        tp.stop_process(redis, "redis")
    checks.eq("direct run: exit code", 0, fast_rc)
    checks.eq("slow run: exit code", 0, slow_rc)
    # A worker that waited for Redis would take about 1 s an event (over 1,000 s for the lot);
    # measured: 0.3 s plain, 3.3 s under ASan with a build beside. 60 s tells them apart on any
    # load; comparing the two runs' rates (windows of a fraction of a second) would not.
    checks.true("slow Redis: every event judged locally within 60 s", slow_took <= 60,
                f"{slow_took:.1f} s (direct run: {fast_rate:.0f} events/s, slow: {slow_rate:.0f})")
    checks.true("slow Redis: the LLM verdicts were still waiting for the ledger",
                slow_llm_in < n // 2, f"{slow_llm_in} of {n} in")
    return (f"events/s with Redis answering at once: {fast_rate:.0f}; answering after "
            f"{DELAY_S:.0f} s: {slow_rate:.0f}")


if __name__ == "__main__":
    sys.exit(tp.run_script("test_slow_ledger", run))
