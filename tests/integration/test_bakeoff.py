#!/usr/bin/python3
"""`assay bakeoff` end to end against the fake provider (tests/tools/fake_llm_server.cpp).

  1. Three recorded arms over the first ten dev-data questions (the dataset's answer, its first
     sentence, the first two sentences of the first context), two judges (OpenAI gpt-4o-mini and
     Anthropic claude-3-5-haiku at the fake), two passes: the Markdown report, the JSON and the
     HTML page, screenshotted by headless Chromium (Debian's `chromium`).
     The fake scores each output from its own text (length and a hash of text, criterion and
     model), so every arm's consensus per input is known here, whatever labels it was shown
     under: the JSON's consensus must equal it (the labels were mapped back right).
  2. A live arm and a two-step workflow (Anthropic then OpenAI, the first step's output in the
     second's template) beside a recorded arm: the generations are what the fake answers to the
     rendered templates; 9 generation and 6 judge calls.
  3. Two judges that always prefer the output labelled A (the fake's "position-biased" models,
     priced through --budget-config): no arm wins more than 7 of the 10 inputs by position alone,
     and the audit flags both judges.
  4. --max-cost-eur below the estimate: exit 3 and not one request reaches the provider.
  5. A daily cap smaller than the estimate: exit 3 before any call.
  6. A judge call the provider refuses (HTTP 400): that input is listed as not judged, left out
     of the intervals (1 degree of freedom over 2 inputs), null in the JSON; exit code 1.
Invoked by ctest with --assayd, --mock-broker and --data (tests/CMakeLists.txt).
"""

import json
import os
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402

CRITERIA = [("relevance", 30), ("completeness", 25), ("clarity", 20), ("accuracy", 15),
            ("format", 10)]


def fnv1a(text):
    h = 1469598103934665603
    for b in text.encode():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def fake_score(model, criterion, text):
    """tests/tools/fake_llm_server.cpp listwiseReply, for one output and criterion."""
    words = text.count(" ") + 1
    return min(100, min(85, 20 + words // 2) + fnv1a(f"{model}/{criterion}/{text}") % 11)


def weighted(model, text):
    return sum(w * fake_score(model, c, text) for c, w in CRITERIA) / 100


def first_sentence(text):
    m = re.match(r"(.+?[.!?])(\s|$)", text, re.S)
    return m.group(1) if m else text


def requests_made(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_fake/stats", timeout=5) as r:
        return json.loads(r.read())["requests"]


def run_assay(assay, args, workdir):
    p = subprocess.run([assay, "bakeoff", *args], cwd=workdir, capture_output=True, text=True,
                       timeout=240)
    tp.log(f"assay bakeoff {' '.join(args)} -> {p.returncode}\n{p.stderr[-1500:]}")
    return p


def judges_yaml(port, models=(("mini", "openai", "gpt-4o-mini"),
                              ("haiku", "anthropic", "claude-3-5-haiku-latest"))):
    lines = ["judges:"]
    for name, provider, model in models:
        endpoint = f"http://127.0.0.1:{port}" + ("/v1" if provider == "openai" else "")
        lines.append(f"  - {{name: {name}, provider: {provider}, endpoint: '{endpoint}', "
                     f"model: {model}}}")
    return "\n".join(lines) + "\n"


def write_arms(workdir, events):
    with open(os.path.join(workdir, "inputs.jsonl"), "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    outputs = {"dataset answer": [e["answer"] for e in events],
               "first sentence": [first_sentence(e["answer"]) for e in events],
               "extractive": [" ".join(re.split(r"(?<=[.!?])\s+",
                                                e["contexts"][0]["text"] if e["contexts"]
                                                else e["question"])[:2]) for e in events]}
    for name in ("first sentence", "extractive"):
        with open(os.path.join(workdir, name.replace(" ", "_") + ".jsonl"), "w") as f:
            for e, out in zip(events, outputs[name]):
                f.write(json.dumps({"id": e["id"], "output": out}) + "\n")
    return outputs


RECORDED_ARMS = """arms:
  - {name: dataset answer, recorded: inputs.jsonl, field: /answer}
  - {name: first sentence, recorded: first_sentence.jsonl}
  - {name: extractive, recorded: extractive.jsonl}
"""


def screenshot(html, png, checks):
    p = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--window-size=1000,1400", f"--screenshot={png}",
                        "file://" + html], capture_output=True, text=True, timeout=120)
    if not checks.true("chromium wrote a screenshot of the HTML report", os.path.exists(png),
                       p.stderr[-500:]):
        return
    from PIL import Image
    img = Image.open(png).convert("RGB")
    checks.eq("screenshot size", (1000, 1400), img.size)
    colours = img.getcolors(maxcolors=1 << 20)
    count = {rgb: n for n, rgb in colours}
    # The chart: the means' dots (#d1495b) and the intervals' bars (#1f6fb2), drawn in the page.
    checks.true("the screenshot shows the means' dots", count.get((0xd1, 0x49, 0x5b), 0) > 300,
                count.get((0xd1, 0x49, 0x5b), 0))
    checks.true("the screenshot shows the intervals", count.get((0x1f, 0x6f, 0xb2), 0) > 300,
                count.get((0x1f, 0x6f, 0xb2), 0))
    checks.true("the page is not blank", len(colours) > 50, len(colours))


def recorded_case(args, assay, workdir, port, checks):
    events = [json.loads(line) for line in open(args.data)][:10]
    outputs = write_arms(workdir, events)
    with open(os.path.join(workdir, "bakeoff.yaml"), "w") as f:
        f.write("name: answer styles\nseed: 7\npasses: 2\n"
                "inputs: {file: inputs.jsonl, limit: 10}\n" + RECORDED_ARMS + judges_yaml(port))
    p = run_assay(assay, ["--config", "bakeoff.yaml", "--json", "out.json", "--html", "out.html",
                          "--history", "history.jsonl", "--max-cost-eur", "1"], workdir)
    checks.eq("recorded bakeoff exit code", 0, p.returncode)
    print(p.stdout)
    for section in ("# Bakeoff: answer styles", "## Consensus", "## Agreement between judges",
                    "## Position audit", "Student's t with 9 degrees of freedom"):
        checks.true(f"the Markdown report has '{section}'", section in p.stdout)
    checks.true("the estimate is printed before the calls",
                "Estimate before any call: 40 calls" in p.stderr)
    result = json.load(open(os.path.join(workdir, "out.json")))
    calls = result["calls"]
    checks.eq("judge calls made (2 judges × 10 inputs × 2 passes), all valid", (40, 40),
              (len(calls), sum(c["ok"] for c in calls)))
    orders = {tuple(c["order"]) for c in calls}
    checks.true("label orders vary between calls", len(orders) >= 4, orders)
    worst = 0
    for row in result["consensus"]:
        i = [e["id"] for e in events].index(row["input"])
        for arm, texts in outputs.items():
            expected = (weighted("gpt-4o-mini", texts[i]) +
                        weighted("claude-3-5-haiku-latest", texts[i])) / 2
            worst = max(worst, abs(row["scores"][arm] - expected))
    checks.true("every arm's consensus is its own outputs' scores, whatever its labels",
                worst < 1e-9, worst)
    # Every call's scores (mapped back to arms) are in the JSON: the consensus is redone here.
    redo = {}
    for c in calls:
        for arm, by_criterion in c["scores"].items():
            w = sum(wt * by_criterion[name] for name, wt in CRITERIA) / 100
            redo.setdefault((c["input"], arm), {}).setdefault(c["who"], []).append(w)
    worst = max(abs(row["scores"][arm] - sum(sum(v) / len(v) for v in redo[(row["input"], arm)]
                                                 .values()) / 2)
                for row in result["consensus"] for arm in outputs)
    checks.true("the consensus redone from the JSON's per-call scores", worst < 1e-9, worst)
    arms = {a["name"]: a for a in result["arms"]}
    for name, a in arms.items():
        checks.true(f"{name}: the interval holds the mean and stays in 0-100",
                    0 <= a["ci95_low"] <= a["mean"] <= a["ci95_high"] <= 100, a)
    checks.eq("wins and ties add up to 10 inputs per first place",
              True, sum(a["wins"] for a in arms.values()) <= 10)
    spent, estimate = result["spent"]["eur"], result["estimate"]["eur"]
    checks.true("spent > 0 and at most the estimate (max_tokens is the worst case)",
                0 < spent <= estimate, (spent, estimate))
    with open(os.path.join(workdir, "history.jsonl")) as f:
        checks.eq("every call's usage recorded for the next estimate", 40, sum(1 for _ in f))
    p2 = run_assay(assay, ["--config", "bakeoff.yaml", "--history", "history.jsonl",
                           "--dry-run"], workdir)
    checks.true("the next estimate takes the completion sizes from the history",
                p2.returncode == 0 and "median of earlier calls" in p2.stderr)
    screenshot(os.path.join(workdir, "out.html"), os.path.join(workdir, "out.png"), checks)
    return arms


def live_case(assay, workdir, port, checks):
    events = [json.loads(line) for line in open(os.path.join(workdir, "inputs.jsonl"))][:3]
    with open(os.path.join(workdir, "live.yaml"), "w") as f:
        f.write(f"""seed: 1
inputs: {{file: inputs.jsonl, limit: 3}}
arms:
  - {{name: recorded, recorded: inputs.jsonl, field: /answer}}
  - name: terse
    provider: openai
    endpoint: 'http://127.0.0.1:{port}/v1'
    model: gpt-4o-mini
    system: Answer in one sentence.
    template: 'Q: {{{{question}}}}'
  - name: draft then polish
    provider: anthropic
    endpoint: 'http://127.0.0.1:{port}'
    model: claude-3-5-haiku-latest
    steps:
      - {{template: 'Draft an answer to {{{{question}}}}'}}
      - {{template: 'Improve: {{{{previous}}}}', provider: openai, endpoint: 'http://127.0.0.1:{port}/v1', model: gpt-4o-mini}}
""" + judges_yaml(port, (("j1", "openai", "gpt-4o"), ("j2", "openai", "gpt-4o-mini"))))
    p = run_assay(assay, ["--config", "live.yaml", "--json", "live.json", "--history",
                          "h2.jsonl"], workdir)
    checks.eq("live bakeoff exit code", 0, p.returncode)
    checks.true("a judge sharing an arm's model family is warned about",
                "shares the model family 'openai'" in p.stderr)
    result = json.load(open(os.path.join(workdir, "live.json")))
    roles = [c["role"] for c in result["calls"]]
    checks.eq("calls: 3 inputs × (1 + 2 steps) generations, 2 judges × 3 inputs", (9, 6),
              (roles.count("generate"), roles.count("judge")))
    arms = {a["name"]: a for a in result["arms"]}
    expected_terse = [("Answer by gpt-4o-mini: Q: " + e["question"])[:len("Answer by gpt-4o-mini: ") + 240]
                      for e in events]
    checks.eq("the live arm's outputs are the provider's answers to the rendered template",
              expected_terse, arms["terse"]["outputs"])
    drafts = [("Answer by claude-3-5-haiku-latest: Draft an answer to " + e["question"])
              [:len("Answer by claude-3-5-haiku-latest: ") + 240] for e in events]
    polished = [("Answer by gpt-4o-mini: Improve: " + d)[:len("Answer by gpt-4o-mini: ") + 240]
                for d in drafts]
    checks.eq("the workflow's second step got the first step's output", polished,
              arms["draft then polish"]["outputs"])
    checks.eq("kinds", ["recorded", "live", "workflow"], [a["kind"] for a in result["arms"]])


def biased_case(assay, workdir, port, checks):
    with open(os.path.join(workdir, "assayd.yaml"), "w") as f:
        f.write("""kafka: {brokers: embedded}
judges:
  - {name: overlap, kind: lexical, metric: context_overlap}
budget:
  prices:
    position-biased-a: {input: 1.0, output: 2.0}
    position-biased-b: {input: 1.0, output: 2.0}
""")
    with open(os.path.join(workdir, "biased.yaml"), "w") as f:
        f.write("seed: 11\ninputs: {file: inputs.jsonl, limit: 10}\n" + RECORDED_ARMS +
                judges_yaml(port, (("biased-a", "openai", "position-biased-a"),
                                   ("biased-b", "anthropic", "position-biased-b"))))
    p = run_assay(assay, ["--config", "biased.yaml", "--json", "biased.json",
                          "--budget-config", "assayd.yaml", "--history", "h3.jsonl"], workdir)
    checks.eq("position-biased bakeoff exit code", 0, p.returncode)
    result = json.load(open(os.path.join(workdir, "biased.json")))
    wins = {a["name"]: a["wins"] for a in result["arms"]}
    checks.true("no arm wins more than 7 of 10 inputs by position alone",
                max(wins.values()) <= 7, wins)
    audit = {a["judge"]: a for a in result["position_audit"]}
    for j in ("biased-a", "biased-b"):
        checks.true(f"{j}: every first place went to the output shown first, flagged (p < 0.05)",
                    audit[j]["share"] == 1.0 and audit[j]["flagged"] and
                    audit[j]["p_value"] < 0.05, audit[j])
    checks.true("the Markdown report flags the position bias", "**position bias**" in p.stdout)


def cost_cases(assay, workdir, port, checks):
    before = requests_made(port)
    p = run_assay(assay, ["--config", "bakeoff.yaml", "--max-cost-eur", "0.0001", "--history",
                          "h4.jsonl"], workdir)
    checks.eq("--max-cost-eur below the estimate: exit code", 3, p.returncode)
    checks.true("the refusal names the estimate", "is above --max-cost-eur" in p.stderr)
    checks.eq("no request reached the provider", before, requests_made(port))
    with open(os.path.join(workdir, "capped.yaml"), "w") as f:
        f.write("kafka: {brokers: embedded}\n"
                "judges:\n  - {name: overlap, kind: lexical, metric: context_overlap}\n"
                "budget: {daily_limit_eur: 0.002}\n")
    p = run_assay(assay, ["--config", "bakeoff.yaml", "--json", "capped.json", "--budget-config",
                          "capped.yaml", "--history", "h5.jsonl"], workdir)
    checks.eq("an estimate above the daily cap: exit code", 3, p.returncode)
    checks.true("the refusal names the cap", "above what is left of today's budget" in p.stderr)
    checks.eq("still no request reached the provider", before, requests_made(port))


def failure_case(assay, workdir, port, checks):
    """A judge call the provider refuses (HTTP 400, not retried): that input is not judged."""
    events = [json.loads(line) for line in open(os.path.join(workdir, "inputs.jsonl"))][:3]
    with open(os.path.join(workdir, "bad_arm.jsonl"), "w") as f:
        for i, e in enumerate(events):
            f.write(json.dumps({"id": e["id"], "output": "fine" if i != 1 else
                                "broken [[fake-status:400]]"}) + "\n")
    with open(os.path.join(workdir, "fail.yaml"), "w") as f:
        f.write("seed: 5\ninputs: {file: inputs.jsonl, limit: 3}\narms:\n"
                "  - {name: dataset answer, recorded: inputs.jsonl, field: /answer}\n"
                "  - {name: bad, recorded: bad_arm.jsonl}\n" + judges_yaml(port))
    p = run_assay(assay, ["--config", "fail.yaml", "--json", "fail.json", "--history",
                          "h6.jsonl"], workdir)
    checks.eq("some judge calls failed: exit code", 1, p.returncode)
    checks.true("the report names the input not judged",
                f"**Inputs not judged** (an arm had no output, or no judge scored every arm): "
                f"{events[1]['id']}." in p.stdout, p.stdout[:600])
    checks.true("the intervals count the 2 inputs judged, 1 degree of freedom",
                "over the 2 inputs judged: Student's t with 1 degree of freedom" in p.stdout)
    result = json.load(open(os.path.join(workdir, "fail.json")))
    rows = {r["input"]: r["scores"] for r in result["consensus"]}
    checks.true("the JSON's consensus of the input not judged is null, never 0",
                rows[events[1]["id"]] is None and rows[events[0]["id"]] is not None, rows)
    checks.eq("failed judge calls counted", 2, result["spent"]["failed_judge_calls"])


def example_case(args, assay, workdir, checks):
    """config/bakeoff.example.yaml as shipped, on the dev events: its estimate (--dry-run)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "config",
                          "bakeoff.example.yaml")
    example = os.path.join(workdir, "example")
    os.makedirs(example)
    with open(source) as f, open(os.path.join(example, "bakeoff.yaml"), "w") as out:
        out.write(f.read())
    os.symlink(os.path.abspath(args.data), os.path.join(example, "events.jsonl"))
    env = dict(os.environ, OPENAI_API_KEY="sk-x", ANTHROPIC_API_KEY="sk-x", MISTRAL_API_KEY="x")
    p = subprocess.run([assay, "bakeoff", "--config", "bakeoff.yaml", "--dry-run", "--history",
                        "h.jsonl"], cwd=example, capture_output=True, text=True, env=env,
                       timeout=60)
    tp.log(p.stderr)
    checks.eq("config/bakeoff.example.yaml: --dry-run exit code", 0, p.returncode)
    checks.true("its estimate: 10 × (1 + 2) generations + 2 judges × 10 inputs × 2 passes",
                "Estimate before any call: 70 calls" in p.stderr, p.stderr[:300])


def run(args, workdir, checks):
    assay = os.path.join(os.path.dirname(os.path.abspath(args.assayd)), "assay")
    fake, port = tp.start_fake_provider(args.assayd)
    try:
        recorded_case(args, assay, workdir, port, checks)
        live_case(assay, workdir, port, checks)
        biased_case(assay, workdir, port, checks)
        cost_cases(assay, workdir, port, checks)
        failure_case(assay, workdir, port, checks)
        example_case(args, assay, workdir, checks)
    finally:
        tp.stop_process(fake, "fake provider")
    return "bakeoff: recorded, live and workflow arms, position audit, cost refusal and cap"


if __name__ == "__main__":
    sys.exit(tp.run_script("bakeoff", run))
