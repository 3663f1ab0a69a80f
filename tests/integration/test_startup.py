#!/usr/bin/python3
"""Start-up failures end with one line naming the cause; never an abort. A configuration
error exits 2 (systemd does not restart it: RestartPreventExitStatus=2), and --check-config
finds it first; a run-time condition exits 1 (a restart may fix it).

Each case is a configuration the loader accepts (or a run-time condition) that cannot start:
  1. kafka.properties {max.poll.interval.ms: 1000}: librdkafka refuses it only when it builds a
     client. `--check-config` builds the clients the way start-up does: exit 2, FILE:LINE:COLUMN
     and the property with its constraint. Started anyway: exit 2 (it used to be 134, an abort).
  2. sinks.jsonl.path that cannot be created (under /proc, even as root): --check-config and
     start-up exit 2 naming sinks.jsonl.path.
  3. admin.listen on a port another process holds: exit 1 naming admin.listen.
  4. an LLM judge whose api_key_env is not set: --check-config warns (exit 0: the service's
     environment is not the shell's); start-up exits 2 naming judges[0].api_key_env.
  5. tracking.baseline_file with bad content: exit 2 naming tracking.baseline_file and the line;
     --check-config reports it at the key's line.
  6. an LLM judge's ca_file that does not exist, or is not PEM: --check-config and start-up
     exit 2 naming judges[1].ca_file (start-up used to exit 1 with "asio.ssl error").
  7. the configuration file is a FIFO, /dev/zero, or holds a byte that is not UTF-8: exit 2 at
     once, naming the file (and the line and column of the byte).
--check-config also refuses a JSON Lines path that is a folder and an admin host that does not
resolve. Last, /readyz says why it answers 503: an LLM judge whose budget store does not answer.
Each run uses the embedded broker, so a case takes well under a second; every case must print
exactly one critical line and nothing an abort or a sanitizer prints (scripts/test runs this
test again on the AddressSanitizer + UndefinedBehaviorSanitizer build).
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

BASE = """kafka: {{brokers: embedded, topic: rag.events, group_id: startup{n}{kafka}}}
judges:
  - {{name: overlap, kind: lexical, metric: context_overlap}}
{judges}admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: "{jsonl}"}}}}
{extra}"""


def write_config(workdir, name, n, admin=0, kafka="", judges="", jsonl=None, extra=""):
    path = os.path.join(workdir, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(BASE.format(n=n, kafka=kafka, judges=judges, admin=admin,
                            jsonl=jsonl or os.path.join(workdir, f"{name}.jsonl"), extra=extra))
    return path


def run_assayd(args, *argv, env=None, timeout=60):
    p = subprocess.run([args.assayd, *argv], capture_output=True, text=True, timeout=timeout,
                       env=env)
    return p.returncode, p.stdout, p.stderr


def readyz_says(args, cfg, admin, words, timeout=30):
    """Starts assayd on `cfg`, polls its /readyz until the body contains `words` (or `timeout`
    seconds pass), stops it; returns the last (status, body)."""
    daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    status, body = 0, ""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and words not in body:
            status, body = tp.http_get(f"http://127.0.0.1:{admin}/readyz")
            time.sleep(0.2)
    finally:
        tp.stop_process(daemon, f"assayd ({words})")
    return status, body


def check_start_failure(checks, args, label, cfg, must_name, env=None, code=2):
    rc, _, err = run_assayd(args, "--config", cfg, env=env)
    critical = [l for l in err.splitlines() if " critical " in l]
    tp.log(f"{label}: exit {rc}; {critical[0] if critical else err.strip()[-300:]}")
    checks.eq(f"{label}: exit code", code, rc)
    checks.eq(f"{label}: one critical line", 1, len(critical))
    checks.true(f"{label}: the line names {must_name}",
                bool(critical) and must_name in critical[0], critical[0] if critical else err)
    checks.true(f"{label}: no abort, no sanitizer report",
                not any(w in err for w in ("terminate called", "Aborted", "Sanitizer",
                                           "runtime error:")), err[-300:])


def run(args, workdir, checks):
    # 1. A property librdkafka refuses only when it builds a client.
    cfg = write_config(workdir, "poll", 1, kafka=", properties: {max.poll.interval.ms: 1000}")
    rc, out, err = run_assayd(args, "--check-config", cfg)
    tp.log(f"--check-config: exit {rc}: {err.strip()}")
    checks.eq("--check-config refuses max.poll.interval.ms 1000", 2, rc)
    checks.true("it points at FILE:1:COLUMN of the property",
                err.startswith(f"{cfg}:1:") and "kafka.properties.max.poll.interval.ms" in err, err)
    checks.true("it names the constraint", "session.timeout.ms" in err, err)
    check_start_failure(checks, args, "max.poll.interval.ms 1000", cfg, "max.poll.interval.ms")

    # 2. A JSON Lines file that cannot be opened.
    cfg = write_config(workdir, "sink", 2, jsonl="/proc/assay/no/such/dir/j.jsonl")
    rc, _, err = run_assayd(args, "--check-config", cfg)
    checks.eq("--check-config refuses a path under /proc", 2, rc)
    checks.true("it names FILE:LINE:COL of sinks.jsonl.path and /proc",
                f"{cfg}:5:23: sinks.jsonl.path: " in err
                and "'/proc' is a pseudo file system" in err, err)
    check_start_failure(checks, args, "sinks.jsonl.path unopenable", cfg, "sinks.jsonl.path")

    # 2b. A JSON Lines path that is a folder, an admin host that does not resolve: --check-config
    #     sees both (the file's content), as start-up would.
    cfg = write_config(workdir, "dir", 6, jsonl=workdir)
    rc, _, err = run_assayd(args, "--check-config", cfg)
    checks.eq("--check-config: sinks.jsonl.path is a folder: exit", 2, rc)
    checks.true("it names sinks.jsonl.path", "sinks.jsonl.path: " in err and "is a directory" in err,
                err)
    cfg = write_config(workdir, "host", 7)
    with open(cfg) as f:
        text = f.read().replace('listen: "127.0.0.1:0"', 'listen: "256.1.1.1:0"')
    with open(cfg, "w") as f:
        f.write(text)
    rc, _, err = run_assayd(args, "--check-config", cfg)
    checks.eq("--check-config: admin host that does not resolve: exit", 2, rc)
    checks.true("it names FILE:LINE:COL of admin.listen",
                f"{cfg}:4:17: admin.listen: cannot resolve '256.1.1.1'" in err, err)
    # An address that resolves but is not this host's: bind() would fail at start-up (exit 1).
    with open(cfg, "w") as f:
        f.write(text.replace("256.1.1.1", "192.0.2.1"))  # TEST-NET-1 (RFC 5737)
    rc, _, err = run_assayd(args, "--check-config", cfg)
    checks.eq("--check-config: admin address not of this host: exit", 2, rc)
    checks.true("it says the address is not this host's",
                f"{cfg}:4:17: admin.listen: '192.0.2.1' is not an address of this host" in err,
                err)
    rc, _, err = run_assayd(args, "--check-config", cfg, "--config", cfg)
    checks.eq("--check-config with --config: a usage error", 2, rc)
    checks.true("it says --check-config takes no other option", "takes no other option" in err,
                err)

    # 3. The admin port taken by another process.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        cfg = write_config(workdir, "port", 3, admin=held.getsockname()[1])
        check_start_failure(checks, args, "admin port taken", cfg, "admin.listen", code=1)

    # 4. An API key variable that is not set.
    llm = ("  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, "
           "api_key_env: ASSAY_TEST_KEY_NOT_SET}\n")
    cfg = write_config(workdir, "key", 4, judges=llm)
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_TEST_KEY_NOT_SET"}
    rc, out, err = run_assayd(args, "--check-config", cfg, env=env)
    checks.eq("--check-config with the key variable unset: exit", 0, rc)
    checks.true("--check-config warns about the variable",
                "judges[1].api_key_env: warning: ASSAY_TEST_KEY_NOT_SET is not set" in err, err)
    check_start_failure(checks, args, "API key variable unset", cfg, "judges[1].api_key_env",
                        env=env)
    rc, _, err = run_assayd(args, "--config", cfg, env=env)
    checks.true("start-up: the unset variable's FILE:LINE:COL",
                f"{cfg}:4:71: judges[1].api_key_env: " in err, err)

    # 5. A baseline file whose content is not judgments.
    bad = os.path.join(workdir, "baseline.jsonl")
    with open(bad, "w") as f:
        f.write('{"id": "a", "verdicts": []}\nnot json\n')
    cfg = write_config(workdir, "baseline", 5, extra=f'tracking: {{baseline_file: "{bad}"}}\n')
    check_start_failure(checks, args, "baseline file content", cfg, "tracking.baseline_file")
    rc, _, err = run_assayd(args, "--check-config", cfg)
    checks.eq("--check-config reads the baseline file: exit", 2, rc)
    checks.true("it points at the key's line", f"{cfg}:6:" in err and "tracking.baseline_file" in err,
                err)

    # 6. An LLM judge's ca_file that is missing, or not PEM.
    not_pem = os.path.join(workdir, "not-pem.txt")
    with open(not_pem, "w") as f:
        f.write("not a certificate\n")
    for label, ca, message in [("missing ca_file", "/nonexistent/ca.pem", "cannot read"),
                               ("ca_file not PEM", not_pem, "is not a PEM certificate bundle")]:
        llm = ("  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, "
               f"endpoint: \"https://127.0.0.1:1/v1\", ca_file: \"{ca}\"}}\n")
        cfg = write_config(workdir, "ca", 9, judges=llm)
        rc, _, err = run_assayd(args, "--check-config", cfg)
        checks.eq(f"--check-config: {label}: exit", 2, rc)
        checks.true(f"--check-config: {label}: FILE:LINE:COL judges[1].ca_file",
                    f"{cfg}:4:" in err and "judges[1].ca_file: " in err and message in err, err)
        rc, _, err = run_assayd(args, "--config", cfg)  # the loader's error, as for a typo
        checks.eq(f"start-up: {label}: exit", 2, rc)
        checks.true(f"start-up: {label}: the same FILE:LINE:COL line",
                    f"{cfg}:4:" in err and "judges[1].ca_file: " in err and message in err, err)

    # 7. Secrets the shell cannot see (they are the service's: LoadCredential=): --check-config
    #    warns (exit 0), start-up refuses them (exit 2) naming the key.
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    llm = ("  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, "
           "api_key_file: openai_api_key}\n")
    for label, judges, extra, key in [
            ("budget.password_file", llm, 'budget: {password_file: redis_password}\n',
             "budget.password_file"),
            ("kafka.secret_env", "", "", "kafka.secret_env.sasl.password")]:
        kafka = (", secret_env: {sasl.password: ASSAY_TEST_UNSET_PASSWORD}"
                 if "kafka" in label else "")
        cfg = write_config(workdir, "secret", 10, judges=judges, kafka=kafka, extra=extra)
        rc, _, err = run_assayd(args, "--check-config", cfg, env=env)
        checks.eq(f"--check-config: {label} unreadable here: exit", 0, rc)
        checks.true(f"--check-config: {label}: a warning at its line",
                    f"{key}: warning: " in err, err)
        rc, _, err = run_assayd(args, "--config", cfg, env=env)
        checks.eq(f"start-up: {label} unreadable: exit", 2, rc)
        checks.true(f"start-up: {label}: FILE:LINE:COL names it", f"{cfg}:" in err and f"{key}: " in err,
                    err)

    # 8. Under systemd (stderr is the journal: JOURNAL_STREAM names it), every line carries
    #    its syslog priority, the loader's errors printed before the logger included.
    bad = write_config(workdir, "journal", 11, extra="sampling: {rat: 0.5}\n")
    for label, cfg, first in [("a loader error", bad, "<3>"),
                              ("a start-up error", write_config(workdir, "journal2", 12,
                                                                jsonl="/proc/assay/j.jsonl"),
                               "<6>info assayd ")]:
        err_path = os.path.join(workdir, "journal.err")
        with open(err_path, "wb") as err_file:
            st = os.fstat(err_file.fileno())
            env = dict(os.environ, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
            rc = subprocess.run([args.assayd, "--config", cfg], stderr=err_file,
                                stdout=subprocess.DEVNULL, env=env, timeout=60).returncode
        with open(err_path) as f:
            lines = f.read().splitlines()
        tp.log(f"journal, {label}: exit {rc}: {lines[:3]}")
        checks.eq(f"journal, {label}: exit", 2, rc)
        checks.true(f"journal, {label}: every line has a <N> priority prefix",
                    bool(lines) and all(l[:1] == "<" and l[2:3] == ">" for l in lines), lines)
        checks.true(f"journal, {label}: the first line", lines[0].startswith(first), lines[0])
        checks.true(f"journal, {label}: the error at priority 3 or 2",
                    any(l.startswith(("<3>", "<2>")) for l in lines), lines)

    # 8a. A Kafka property naming a file that is not there: the file and the OS's reason, not
    #     librdkafka's OpenSSL error code.
    cfg = write_config(workdir, "ca", 14, kafka=", properties: {security.protocol: ssl, "
                       "ssl.ca.location: /nonexistent/assay-ca.pem}")
    rc, _, err = run_assayd(args, "--check-config", cfg)
    checks.eq("--check-config: ssl.ca.location missing: exit", 2, rc)
    checks.true("it names FILE:1:COL, the property, the file and ENOENT",
                err.startswith(f"{cfg}:1:") and "kafka.properties.ssl.ca.location: cannot read "
                "'/nonexistent/assay-ca.pem': No such file or directory" in err
                and "x509" not in err, err)
    check_start_failure(checks, args, "ssl.ca.location missing", cfg, "ssl.ca.location")

    # 8b. A loader error and a start-up error in one file: both reported in one round, in file
    #     order (an operator fixing the first does not discover the second at the next start).
    both = write_config(workdir, "both", 13, jsonl="/proc/assay/j.jsonl",
                        extra="sampling: {rat: 0.5}\n")
    for argv in (["--config", both], ["--check-config", both]):
        rc, _, err = run_assayd(args, *argv)
        lines = [l for l in err.splitlines() if l.startswith(both + ":")]
        checks.eq(f"{argv[0]}: loader and start-up errors: exit, lines", (2, 2), (rc, len(lines)))
        checks.true(f"{argv[0]}: sinks.jsonl.path (line 5) before sampling.rat (line 6)",
                    len(lines) == 2 and ":5:23: sinks.jsonl.path: " in lines[0]
                    and ":6:12: sampling.rat: unknown key" in lines[1], lines)

    # 8c. The file itself is hostile (docs/configuration.md): a FIFO with no writer (it hung
    #     --check-config and start-up), /dev/zero (exit 134), a raw non-UTF-8 byte in a judge
    #     name (accepted: it reached /metrics, which promtool then refused).
    fifo = os.path.join(workdir, "fifo.yaml")
    os.mkfifo(fifo)
    raw = os.path.join(workdir, "raw.yaml")
    with open(raw, "wb") as f:
        f.write(b"judges:\n  - {name: \"ok\xff\", kind: lexical, metric: rouge_l}\n")
    for label, path, says in (("a FIFO", fifo, f"{fifo}: is a FIFO, not a regular file"),
                              ("/dev/zero", "/dev/zero",
                               "/dev/zero: is a character device, not a regular file"),
                              ("a non-UTF-8 byte", raw,
                               f"{raw}:2:15: not UTF-8: byte \\xFF does not start")):
        for flag in ("--check-config", "--config"):
            rc, _, err = run_assayd(args, flag, path, timeout=30)
            checks.eq(f"{flag} {label}: exit", 2, rc)
            checks.true(f"{flag} {label}: says why", says in err, err[-300:])

    # 8d. review.path and canary.state_file that cannot be written (a new user's trial: both
    #     passed --check-config; the review file then stopped start-up with exit 1, the state
    #     file failed at every canary run): both refused by --check-config and start-up.
    canary = os.path.join(workdir, "canary.jsonl")
    with open(canary, "w") as f:
        f.write('{"id": "c1", "question": "q", "contexts": [{"id": "1", "text": "t"}], '
                '"answer": "a", "labels": {"hallucinated": false}}\n')
    for key, extra in (
            ("review.path", "review: {path: /proc/assay/review.jsonl, "
                            "judges: {overlap: {below: 0.5}}}\n"),
            ("canary.state_file", f"canary: {{file: {canary}, "
                                  f"state_file: {workdir}/no/such/folder/state.json}}\n")):
        cfg = write_config(workdir, key.replace(".", "_"), 16, extra=extra)
        rc, _, err = run_assayd(args, "--check-config", cfg)
        tp.log(f"--check-config, {key}: exit {rc}: {err.strip()}")
        checks.eq(f"--check-config refuses {key}: exit", 2, rc)
        checks.true(f"--check-config names {key}", f"{key}: " in err, err)
        check_start_failure(checks, args, f"{key} unwritable", cfg, key)

    # 9. Readiness says why: an LLM judge whose budget store does not answer.
    admin = tp.free_loopback_port()
    llm = ("  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, "
           "endpoint: \"http://127.0.0.1:1/v1\"}\n")
    cfg = write_config(workdir, "ready", 8, admin=admin, judges=llm,
                       extra='budget: {store: "redis://127.0.0.1:1/0"}\n')
    status, body = readyz_says(args, cfg, admin, "budget store")
    tp.log(f"/readyz with the budget store down: {status} {body.strip()}")
    checks.eq("/readyz with the budget store down: status", 503, status)
    checks.true("/readyz names the budget store", "budget store" in body, body)

    # 10. No broker at all from the start: /readyz names the brokers, not "waiting for the
    #     assignment" (an operator trial saw the latter for as long as the broker was gone).
    admin = tp.free_loopback_port()
    closed = tp.free_loopback_port()
    cfg = write_config(workdir, "nobroker", 15, admin=admin)
    with open(cfg) as f:
        text = f.read().replace("brokers: embedded", f'brokers: "127.0.0.1:{closed}"')
    with open(cfg, "w") as f:
        f.write(text)
    status, body = readyz_says(args, cfg, admin, "broker")
    tp.log(f"/readyz with no broker from the start: {status} {body.strip()}")
    checks.eq("/readyz with no broker: status", 503, status)
    checks.true("/readyz names the brokers",
                f"no Kafka broker answers (kafka.brokers: 127.0.0.1:{closed})" in body, body)

    # 11. claim_support's weights file edited in place, then SIGHUP: the configuration reads the
    #     same but the judge's version does not (its file's bytes are in it): the judges are
    #     rebuilt and the change counted (a new user's trial: "cfg unchanged", the old model kept).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "judges", "data", "claim_support_weights.json")) as f:
        weights_text = f.read()
    weights = os.path.join(workdir, "weights.json")
    with open(weights, "w") as f:
        f.write(weights_text)
    admin = tp.free_loopback_port()
    cfg = write_config(workdir, "weights", 17, admin=admin, judges=(
        f"  - {{name: cs, kind: lexical, metric: claim_support, weights: {weights}}}\n"))
    log_path = os.path.join(workdir, "weights.log")
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen([args.assayd, "--config", cfg], stdout=log, stderr=log,
                                  start_new_session=True)
    url = f"http://127.0.0.1:{admin}"

    def value(name, **labels):
        status, text = tp.http_get(url + "/metrics")
        return tp.metric(tp.parse_metrics(text), name, **labels) if status == 200 else None

    try:
        tp.wait_for("cs's version exported",
                    lambda: value("assay_judge_version_changes_total", judge="cs") == 0, 30)
        with open(weights, "w") as f:
            f.write(weights_text.replace('"intercept": ', '"intercept": 0.25, "was": '))
        daemon.send_signal(signal.SIGHUP)
        tp.wait_for("the reload applied",
                    lambda: value("assay_config_reloads_total", result="applied") == 1, 15)
        checks.eq("weights edited in place: cs's version change counted", 1,
                  value("assay_judge_version_changes_total", judge="cs"))
    finally:
        tp.stop_process(daemon, "assayd (weights)")
    with open(log_path) as f:
        log = f.read()
    checks.true("the log says why the judges were rebuilt",
                "SIGHUP: judges rebuilt ('cs' (a file it reads changed))" in log, log[-2000:])
    return "start-up failures exit 2 (configuration) or 1 (run time) with one line naming the cause"


if __name__ == "__main__":
    sys.exit(tp.run_script("test_startup", run))
