#!/usr/bin/python3
"""Redaction before anything leaves (issue 14): no original value reaches the provider.

  1. the fake OpenAI-compatible provider (tests/tools/fake_llm_server.cpp) logs the body of
     every request it receives (--request-log);
  2. assayd on its embedded broker replays 7 events: the issue's one ("Contact
     jane.doe@example.org or +44 20 7946 0958, card 4111 1111 1111 1111"), then one seeded
     with each kind (an IBAN, an IPv4 and an IPv6 address, a bearer token and an API key, a
     phone in a context and the answer, a card failing Luhn), with `redact` on for every
     detector and a faithfulness LLM judge that sees every event.

Asserts: none of the 14 original values occurs in any request body; the placeholders do
([EMAIL_1], [PHONE_1], [CARD_1] in the issue's event; [IBAN_1], [IP_1], [IP_2], [TOKEN_1],
[TOKEN_2]; the same phone in a context and the answer is [PHONE_1] in both); "4111 1111 1111
1112" (it fails Luhn) is sent as it is; assay_redactions_total{detector} counts each
replacement (email 2, phone 4, card 2, iban 2, ip 4, token 3); the local judge saw the
original text (claim_support's evidence quotes the unredacted phone number). A second run with
`sinks: true` and `local_judges: true` writes no original value into the judgments file.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

ISSUE = "Contact jane.doe@example.org or +44 20 7946 0958, card 4111 1111 1111 1111"
EVENTS = [
    {"id": "r1", "question": "How do I reach support?",
     "contexts": [{"id": "c1", "text": ISSUE + "."}], "answer": ISSUE + "."},
    {"id": "r2", "question": "Where do I send the deposit?",
     "contexts": [{"id": "c1", "text": "Pay to IBAN GB82 WEST 1234 5698 7654 32 within 5 days."}],
     "answer": "To GB82 WEST 1234 5698 7654 32."},
    {"id": "r3", "question": "Which hosts are allowed?",
     "contexts": [{"id": "c1", "text": "Allowed: 192.168.10.20 and 2001:db8::8a2e:370:7334."}],
     "answer": "192.168.10.20 and 2001:db8::8a2e:370:7334."},
    {"id": "r4", "question": "How do I call the API?",
     "contexts": [{"id": "c1", "text": "Send Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdefgh."}],
     "answer": "Use Bearer eyJhbGciOiJIUzI1NiJ9abcdefgh or the key sk-proj-AbCdEfGhIjKlMnOpQrStUv12."},
    {"id": "r5", "question": "What is the hotline?",
     "contexts": [{"id": "c1", "text": "The hotline is 020 7946 0958, weekdays."}],
     "answer": "Call 020 7946 0958 on weekdays, or visit the shop in person."},
    {"id": "r6", "question": "Is this card valid?",
     "contexts": [{"id": "c1", "text": "Test number 4111 1111 1111 1112 is rejected."}],
     "answer": "No: 4111 1111 1111 1112 fails the check."},
    {"id": "r7", "question": "What are the opening hours?",
     "contexts": [{"id": "c1", "text": "Open 9:00 to 18:00."}], "answer": "9:00 to 18:00."},
]
ORIGINALS = ["jane.doe@example.org", "+44 20 7946 0958", "7946 0958", "4111 1111 1111 1111",
             "GB82 WEST 1234 5698 7654 32", "GB82WEST", "192.168.10.20",
             "2001:db8::8a2e:370:7334", "eyJhbGciOiJIUzI1NiJ9abcdefgh",
             "sk-proj-AbCdEfGhIjKlMnOpQrStUv12", "020 7946 0958", "WEST 1234", "8a2e:370",
             "jane.doe"]


def run(args, workdir, checks):
    events = os.path.join(workdir, "events.jsonl")
    with open(events, "w") as f:
        for e in EVENTS:
            f.write(json.dumps(e) + "\n")
    request_log = os.path.join(workdir, "requests.jsonl")
    fake, port = tp.start_fake_provider(args.assayd, "--request-log", request_log)
    daemon = None
    try:
        admin = tp.free_loopback_port()
        url = f"http://127.0.0.1:{admin}"
        jsonl = os.path.join(workdir, "j.jsonl")
        cfg = os.path.join(workdir, "c.yaml")
        with open(cfg, "w") as f:
            f.write(f"""kafka: {{brokers: embedded, topic: rag.redact, group_id: redact-test}}
sampling: {{rate: 1.0}}
redact:
  detectors: [email, phone, card, iban, ip, token]
budget: {{daily_limit_eur: 1, store: memory}}
judges:
  - {{name: citation, kind: check, check: cites_source}}
  - {{name: claim_support, kind: lexical, metric: claim_support}}
  - name: faithfulness_llm
    kind: llm
    criterion: faithfulness
    endpoint: "http://127.0.0.1:{port}/v1"
    model: gpt-4o-mini
admin: {{listen: "127.0.0.1:{admin}"}}
sinks: {{jsonl: {{path: {json.dumps(jsonl)}}}}}
""")
        log = open(os.path.join(workdir, "assayd.log"), "wb")
        daemon = subprocess.Popen([args.assayd, "--config", cfg, "--replay", events], stdout=log,
                                  stderr=log, start_new_session=True)
        tp.wait_for("7 judgments", lambda: tp.judged_count(url) == len(EVENTS), 60)
        samples = tp.parse_metrics(tp.http_get(url + "/metrics")[1])
        counts = {d: tp.metric(samples, "assay_redactions_total", detector=d)
                  for d in ["email", "phone", "card", "iban", "ip", "token"]}
        tp.stop_process(daemon, "assayd")
        daemon = None
        bodies = [l for l in open(request_log) if l.strip()]
        checks.eq("requests the provider received (one per event)", len(EVENTS), len(bodies))
        sent = "\n".join(m["content"] for b in bodies for m in json.loads(b)["messages"])
        leaked = [o for o in ORIGINALS if o in sent]
        checks.eq("original values in the provider's request bodies", [], leaked)
        by_id = {}
        for b in bodies:
            user = json.loads(b)["messages"][-1]["content"]
            for e in EVENTS:
                if json.dumps(e["question"])[1:-1] in user:
                    by_id[e["id"]] = user
        checks.true("the issue's event: [EMAIL_1], [PHONE_1] and [CARD_1]",
                    all(p in by_id.get("r1", "") for p in ("[EMAIL_1]", "[PHONE_1]", "[CARD_1]")),
                    by_id.get("r1", "")[:300])
        checks.true("an IBAN: [IBAN_1] in the context and the answer",
                    by_id.get("r2", "").count("[IBAN_1]") == 2, by_id.get("r2", "")[:300])
        checks.true("IPv4 and IPv6: [IP_1] and [IP_2], twice each",
                    by_id.get("r3", "").count("[IP_1]") == 2 and by_id.get("r3", "").count("[IP_2]") == 2,
                    by_id.get("r3", "")[:300])
        checks.true("a bearer token and an API key: [TOKEN_1] twice, [TOKEN_2] once",
                    by_id.get("r4", "").count("[TOKEN_1]") == 2 and "[TOKEN_2]" in by_id.get("r4", ""),
                    by_id.get("r4", "")[:300])
        checks.true("one phone in the context and the answer: [PHONE_1] in both",
                    by_id.get("r5", "").count("[PHONE_1]") == 2, by_id.get("r5", "")[:300])
        checks.true("a card number failing Luhn is sent as it is",
                    "4111 1111 1111 1112" in by_id.get("r6", ""), by_id.get("r6", "")[:300])
        checks.eq("assay_redactions_total by detector",
                  {"email": 2, "phone": 4, "card": 2, "iban": 2, "ip": 4, "token": 3}, counts)
        judgments = {json.loads(l)["id"]: json.loads(l) for l in open(jsonl)}
        evidence = " ".join(v.get("evidence", "") for v in judgments["r5"]["verdicts"]
                            if v["judge"] == "claim_support")
        checks.true("the local judges saw the original text (redact.local_judges: false; the "
                    "judgments file stays unredacted without redact.sinks)",
                    "020 7946 0958" in evidence, evidence)

        # redact.sinks: true, local_judges: true: the judgments file holds placeholders only.
        jsonl2 = os.path.join(workdir, "j2.jsonl")
        with open(cfg) as f:
            text = f.read()
        text = (text.replace("redact-test", "redact-test-2").replace("rag.redact", "rag.redact2")
                .replace(json.dumps(jsonl), json.dumps(jsonl2))
                .replace("  detectors: [email, phone, card, iban, ip, token]\n",
                         "  detectors: [email, phone, card, iban, ip, token]\n"
                         "  sinks: true\n  local_judges: true\n"))
        with open(cfg, "w") as f:
            f.write(text)
        daemon = subprocess.Popen([args.assayd, "--config", cfg, "--replay", events], stdout=log,
                                  stderr=log, start_new_session=True)
        tp.wait_for("7 more judgments", lambda: tp.judged_count(url) == len(EVENTS), 60)
        tp.stop_process(daemon, "assayd")
        daemon = None
        written = open(jsonl2).read()
        checks.eq("redact.sinks: original values in the judgments file", [],
                  [o for o in ORIGINALS if o in written])
        second = {json.loads(l)["id"]: json.loads(l) for l in written.splitlines()}
        evidence2 = " ".join(v.get("evidence", "") for v in second["r5"]["verdicts"]
                             if v["judge"] == "claim_support")
        checks.true("redact.sinks: claim_support's evidence quotes [PHONE_1]",
                    "[PHONE_1]" in evidence2, evidence2)
        return "no original value reached the provider; every placeholder where expected"
    finally:
        tp.stop_process(daemon, "assayd")
        tp.stop_process(fake, "fake provider")


if __name__ == "__main__":
    sys.exit(tp.run_script("test_redaction", run))
