#!/usr/bin/python3
"""Checks the PromQL of the alert rules and of the Grafana dashboard against a /metrics scrape.

    check_expressions.py --metrics-text SCRAPE.txt --rules assay-rules.yml \
        --dashboard assay-dashboard.json [--require-coverage] [--promtool PATH] \
        [--alerting-doc docs/alerting.md]

1. Extracts every expression: `expr` of the recording and alerting rules; every panel target's
   `expr` (panels nested in rows included), the annotations' `expr`, and the metric selectors of
   templating queries (`label_values(metric{...}, label)`, `query_result(expr)`).
2. Has promtool parse every dashboard expression (Grafana variables replaced by plain values)
   as recording rules of a temporary rule file; a parse error names the panel and expression.
3. Checks that every metric name an expression references is exported by the scrape (families
   of `# TYPE` lines, with `_bucket`, `_sum`, `_count` for histograms and summaries, and the
   names of sample lines), recorded by a rule of the rules file, or a series Prometheus makes
   itself (`up`, `ALERTS` ...).
4. Checks that no datasource of the dashboard has a hard-coded uid (only "${datasource}").
5. With --require-coverage: every family of the issue-4 list (REQUIRED_ON_DASHBOARD) is used
   by at least one dashboard expression.
6. With --alerting-doc docs/alerting.md: every alert has runbook text (a non-empty `description`
   or `runbook` annotation) and a `runbook_url` annotation `docs/alerting.md#<anchor>` whose
   anchor is the alert's name in lower case and is the anchor of a heading of that document
   (GitHub's rule: lower case, punctuation dropped, spaces to hyphens, -1, -2... on repeats).

Exit 0 with a one-line summary, 1 with one line per problem, 2 on a usage or input error.
Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Families of issue 4 that the dashboard must show (--require-coverage).
REQUIRED_ON_DASHBOARD = [
    "assay_judge_max_score_ratio", "assay_judge_min_score_ratio", "assay_judge_distinct_scores",
    "assay_judge_score_entropy", "assay_judge_window_size", "assay_judge_lenient",
    "assay_score_window_mean", "assay_score_baseline_mean", "assay_score_recent_mean",
    "assay_score_drift", "assay_score_drift_p_value",
    "assay_score_mean", "assay_score_sd", "assay_score_n", "assay_score_ci95_low",
    "assay_score_ci95_high", "assay_score_ci95_overlap",
    "assay_judge_agreement_kendall_tau", "assay_judge_agreement_spearman",
    "assay_judge_agreement_pairs", "assay_judge_agreement_level", "assay_judge_human_spearman",
    "assay_judge_human_pairs", "assay_annotator_kappa",
    "assay_ab_p_value", "assay_ab_decided", "assay_ab_ratings",
]

# Series that Prometheus itself produces.
BUILTIN_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                  "scrape_samples_post_metric_relabeling", "scrape_series_added",
                  "ALERTS", "ALERTS_FOR_STATE"}

# Keywords, binary and aggregation operators: identifiers that are not metric names.
KEYWORDS = {"sum", "avg", "min", "max", "count", "topk", "bottomk", "quantile", "count_values",
            "stddev", "stdvar", "group", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"}

# Grafana's time variables become a plain duration.
TIME_VARIABLES = ("__rate_interval", "__interval", "__range")


class InputError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Scrape.

def read_scrape(paths):
    """Metric names a scrape exports: families and their histogram/summary series, samples."""
    names = set()
    families = set()
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise InputError(f"{path}: {e.strerror}")
        for line in lines:
            line = line.strip()
            if not line:
                continue
            if line.startswith("#"):
                m = re.match(r"#\s*TYPE\s+([a-zA-Z_:][a-zA-Z0-9_:]*)\s+(\w+)", line)
                if m:
                    name, kind = m.group(1), m.group(2)
                    families.add(name)
                    names.add(name)
                    if kind in ("histogram", "summary", "gaugehistogram"):
                        names.update(name + s for s in ("_bucket", "_sum", "_count"))
                continue
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
            if m:
                names.add(m.group(1))
    if not names:
        raise InputError(f"{', '.join(paths)}: no metric found")
    return names, families


# --------------------------------------------------------------------------------------------
# Rules (a small YAML reader: enough for rule files, so that only the standard library is needed).

# Keys kept from each rule: its kind and expression, and the annotations the runbook check reads.
RULE_KEYS = ("record", "alert", "expr", "description", "runbook", "runbook_url")

KEY_LINE = re.compile(
    r"^(?P<indent>\s*)(?P<dash>-\s+)?(?P<key>[A-Za-z_][\w.-]*)\s*:(?:\s+|$)(?P<rest>.*)$")


def _strip_comment(text):
    """Removes a trailing ` # comment` outside quotes from a plain scalar."""
    m = re.search(r"\s+#", text)
    return text[:m.start()] if m else text


def _read_scalar(lines, i, key_indent, rest):
    """Value of a key whose text after `key:` is rest; returns (value, next line index)."""
    rest = rest.rstrip()
    if rest[:1] in ("|", ">"):
        folded = rest[0] == ">"
        block = []
        j = i + 1
        while j < len(lines):
            text = lines[j]
            if text.strip() and len(text) - len(text.lstrip()) <= key_indent:
                break
            block.append(text)
            j += 1
        while block and not block[-1].strip():
            block.pop()
        indents = [len(t) - len(t.lstrip()) for t in block if t.strip()]
        cut = min(indents) if indents else 0
        block = [t[cut:] for t in block]
        if folded:
            value = " ".join(t.strip() if t.strip() else "\n" for t in block)
        else:
            value = "\n".join(block)
        return value, j
    if rest[:1] in ('"', "'"):
        quote = rest[0]
        text = rest[1:]
        j = i
        parts = []
        while True:
            k = 0
            while k < len(text):
                c = text[k]
                if quote == '"' and c == "\\" and k + 1 < len(text):
                    k += 2
                    continue
                if c == quote:
                    if quote == "'" and text[k + 1:k + 2] == "'":
                        k += 2
                        continue
                    parts.append(text[:k])
                    raw = " ".join(p.strip() if n else p for n, p in enumerate(parts))
                    if quote == "'":
                        return raw.replace("''", "'"), j + 1
                    try:
                        return json.loads('"' + raw + '"'), j + 1
                    except ValueError:
                        return raw, j + 1
                k += 1
            parts.append(text)
            j += 1
            if j >= len(lines):
                raise InputError(f"line {i + 1}: unterminated quoted string")
            text = lines[j]
    value = [_strip_comment(rest)]
    j = i + 1
    while j < len(lines):
        text = lines[j]
        if not text.strip():
            j += 1
            continue
        if len(text) - len(text.lstrip()) <= key_indent or KEY_LINE.match(text):
            break
        value.append(_strip_comment(text.strip()))
        j += 1
    return " ".join(v.strip() for v in value if v.strip()), j


def read_rules(path):
    """Returns (expressions [(where, expr)], recorded names, alerts [{alert, description,
    runbook, runbook_url, _line}]) of a Prometheus rule file."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    items = []  # one dict per YAML list item
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if re.match(r"^\s*(-\s*[{\[]|rules\s*:\s*[{\[])", line):
            raise InputError(f"{path}:{i + 1}: flow-style rules ({{...}}, [...]) are not "
                             "supported: write one key per line")
        m = KEY_LINE.match(line)
        if not m:
            i += 1
            continue
        key_indent = len(m.group("indent")) + len(m.group("dash") or "")
        if m.group("dash"):
            items.append({"_line": i + 1})
        try:
            value, i = _read_scalar(lines, i, key_indent, m.group("rest"))
        except InputError as e:
            raise InputError(f"{path}: {e}")
        if items and m.group("key") in RULE_KEYS:
            items[-1][m.group("key")] = value
    expressions, recorded = [], set()
    alerts = [item for item in items if "alert" in item]
    for item in items:
        if "expr" not in item:
            continue
        if "record" in item:
            recorded.add(item["record"])
            where = f'recording rule {item["record"]}'
        elif "alert" in item:
            where = f'alert {item["alert"]}'
        else:
            where = f'rule at {path}:{item["_line"]}'
        expressions.append((where, item["expr"]))
    if not expressions:
        raise InputError(f"{path}: no rule found")
    return expressions, recorded, alerts


# --------------------------------------------------------------------------------------------
# Runbooks: every alert's runbook_url names a heading of docs/alerting.md.

def heading_anchors(path):
    """Anchors of the Markdown headings of a document, as GitHub (and GitLab) make them."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    anchors, seen, fence = set(), {}, None
    for line in lines:
        m = re.match(r"\s{0,3}(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)[0]
            elif m.group(1)[0] == fence:
                fence = None
            continue
        if fence is not None:
            continue
        m = re.match(r"\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link keeps its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def check_runbooks(alerts, rules_path, doc_path):
    """Problems with the runbook annotations of the alerts."""
    anchors = heading_anchors(doc_path)
    doc = os.path.basename(doc_path)
    problems = []
    if not alerts:
        problems.append(f"{rules_path}: no alert found")
    for item in alerts:
        name = item["alert"]
        where = f"alert {name} ({rules_path}:{item['_line']})"
        if not (item.get("description") or item.get("runbook") or "").strip():
            problems.append(f"{where}: no runbook text (annotation description or runbook)")
        url = item.get("runbook_url")
        if not url:
            problems.append(f"{where}: no runbook_url annotation")
            continue
        page, _, anchor = url.partition("#")
        want = f"docs/{doc}#{name.lower()}"
        if url != want and not url.endswith("/" + want):
            problems.append(f'{where}: runbook_url "{url}" should be "{want}" (or end with '
                            f'"/{want}")')
        if anchor not in anchors:
            problems.append(f'{where}: runbook_url "{url}": no heading of {doc_path} has the '
                            f'anchor "#{anchor}" (add a heading "{name}")')
    return problems


# --------------------------------------------------------------------------------------------
# Dashboard.

def _walk_panels(panels):
    for panel in panels or []:
        yield panel
        yield from _walk_panels(panel.get("panels"))


def _datasource_uids(node, path="dashboard"):
    """Yields (path, uid) of every datasource reference in the dashboard."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                if isinstance(value, dict) and "uid" in value:
                    yield f"{path}.datasource", value["uid"]
                elif isinstance(value, str):
                    yield f"{path}.datasource", value
            yield from _datasource_uids(value, f"{path}.{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from _datasource_uids(value, f"{path}[{n}]")


def _split_call(text, function):
    """Arguments of function(...) at the start of text, split at top-level commas, or None."""
    m = re.match(r"\s*" + function + r"\s*\(", text)
    if not m:
        return None
    depth, args, start, quote = 0, [], m.end(), None
    k = m.end()
    while k < len(text):
        c = text[k]
        if quote:
            if c == "\\":
                k += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            if depth == 0:
                args.append(text[start:k].strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[start:k].strip())
            start = k + 1
        k += 1
    return None


def read_dashboard(path):
    """Returns (expressions [(where, expr)], problems) of a Grafana dashboard."""
    try:
        with open(path, encoding="utf-8") as f:
            dashboard = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    except ValueError as e:
        raise InputError(f"{path}: not JSON: {e}")
    expressions, problems = [], []
    for panel in _walk_panels(dashboard.get("panels")):
        title = panel.get("title", f'id {panel.get("id")}')
        for target in panel.get("targets") or []:
            expr = target.get("expr")
            if isinstance(expr, str) and expr.strip():
                ref = target.get("refId", "?")
                expressions.append((f'panel "{title}" ({ref})', expr))
    for annotation in (dashboard.get("annotations") or {}).get("list") or []:
        expr = annotation.get("expr")
        if isinstance(expr, str) and expr.strip():
            expressions.append((f'annotation "{annotation.get("name", "?")}"', expr))
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if not isinstance(query, str) or not query.strip():
            query = variable.get("definition") or ""
        where = f'variable ${variable.get("name", "?")}'
        label_values = _split_call(query, "label_values")
        query_result = _split_call(query, "query_result")
        if label_values is not None:
            if len(label_values) == 2:  # label_values(label) names no metric
                expressions.append((where, label_values[0]))
        elif query_result is not None:
            if len(query_result) == 1:
                expressions.append((where, query_result[0]))
        elif query.strip() and not re.match(r"\s*(label_names|metrics)\s*\(", query):
            problems.append(f"{where}: unsupported query {query!r}")
    for where, uid in _datasource_uids(dashboard):
        if uid not in ("${datasource}", "$datasource"):
            problems.append(f'{where}: hard-coded datasource uid "{uid}" '
                            '(use "${datasource}")')
    return expressions, problems


def substitute_grafana_variables(expr):
    """PromQL that promtool can parse: Grafana's variables become plain values."""
    var = r"\$(?:\{(\w+)(?::[^}]*)?\}|(\w+))"
    # Regex matchers on a variable match anything.
    expr = re.sub(r'(=~|!~)\s*"[^"]*\$[^"]*"', r'\1".*"', expr)
    # Time variables.
    expr = re.sub(var, lambda m: "5m" if (m.group(1) or m.group(2)) in TIME_VARIABLES
                  else m.group(0), expr)
    # Others: a word inside a string, a number outside.
    out, quote, k = [], None, 0
    while k < len(expr):
        c = expr[k]
        if quote:
            if c == "\\" and k + 1 < len(expr):
                out.append(expr[k:k + 2])
                k += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        m = re.match(var, expr[k:]) if c == "$" else None
        if m:
            out.append("value" if quote else "1")
            k += m.end()
            continue
        out.append(c)
        k += 1
    return "".join(out)


# --------------------------------------------------------------------------------------------
# PromQL.

def metric_names(expr):
    """Metric names referenced by a PromQL expression."""
    names = set()
    # __name__ matchers name a metric too.
    for m in re.finditer(r'__name__\s*=\s*"([^"]*)"', expr):
        names.add(m.group(1))
    # String literals (handled before the braces: a string may hold "}").
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    # Label matcher blocks, range and subquery durations.
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    # Label lists of grouping and vector-matching modifiers.
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)",
                  " ", text)
    token = re.compile(r"""
        (?P<duration>\b\d+(?:ms|[smhdwy])(?:\d+(?:ms|[smhdwy]))*\b)
      | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
      | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)(?P<call>\s*\()?
    """, re.VERBOSE)
    for m in token.finditer(text):
        ident = m.group("ident")
        if not ident or m.group("call") or ident.lower() in KEYWORDS:
            continue
        names.add(ident)
    return names


def _show(expr):
    """An expression on indented lines, below a problem."""
    return "\n    expr: " + expr.strip().replace("\n", "\n          ")


def promtool_parse(promtool, expressions):
    """Problems promtool finds parsing each (where, expr, original expr)."""
    distinct = {}
    for where, expr, original in expressions:
        distinct.setdefault(expr, []).append((where, original))
    records = {}
    with tempfile.TemporaryDirectory(prefix="check_expressions.") as tmp:
        path = os.path.join(tmp, "dashboard-expressions.yml")
        with open(path, "w", encoding="utf-8") as f:
            f.write("groups:\n  - name: dashboard_expressions\n    rules:\n")
            for n, expr in enumerate(distinct, 1):
                name = f"dashboard_check:expr_{n:04d}"
                records[name] = expr
                f.write(f"      - record: {name}\n        expr: {json.dumps(expr)}\n")
        run = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    if run.returncode == 0:
        return []
    problems, explained = [], False
    for line in (run.stdout + run.stderr).splitlines():
        m = re.search(r'"(dashboard_check:expr_\d{4})": (.*)$', line)
        if not m:
            continue
        explained = True
        for where, original in distinct[records[m.group(1)]]:
            problems.append(f"{where}: {m.group(2)}{_show(original)}")
    if not explained:
        problems.append("promtool check rules failed:\n" + run.stdout + run.stderr)
    return problems


# --------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics-text", action="append", required=True, metavar="SCRAPE",
                        help="a /metrics page in Prometheus text format (repeatable: union)")
    parser.add_argument("--rules", required=True, help="Prometheus rule file")
    parser.add_argument("--dashboard", required=True, help="Grafana dashboard JSON")
    parser.add_argument("--promtool", default=shutil.which("promtool") or "/usr/bin/promtool")
    parser.add_argument("--require-coverage", action="store_true",
                        help="fail if a family of the issue-4 list is on no dashboard panel")
    parser.add_argument("--alerting-doc", metavar="MARKDOWN",
                        help="docs/alerting.md: check every alert's runbook text and that its "
                             "runbook_url names a heading of this document")
    args = parser.parse_args()

    try:
        exported, families = read_scrape(args.metrics_text)
        rule_exprs, recorded, alerts = read_rules(args.rules)
        dashboard_exprs, problems = read_dashboard(args.dashboard)
        if args.alerting_doc:
            problems += check_runbooks(alerts, args.rules, args.alerting_doc)
    except InputError as e:
        print(f"check_expressions: {e}", file=sys.stderr)
        return 2
    if not os.access(args.promtool, os.X_OK):
        print(f"check_expressions: promtool not found ({args.promtool})", file=sys.stderr)
        return 2

    substituted = [(where, substitute_grafana_variables(expr), expr)
                   for where, expr in dashboard_exprs]
    problems += promtool_parse(args.promtool, substituted)

    known = exported | recorded | BUILTIN_SERIES
    used, on_dashboard = set(), set()
    checked = [(where, expr, expr, False) for where, expr in rule_exprs]
    checked += [(where, expr, original, True) for where, expr, original in substituted]
    for where, expr, original, dashboard in checked:
        names = metric_names(expr)
        used |= names
        if dashboard:
            on_dashboard |= names
        for name in sorted(names - known):
            problems.append(f'{where}: unknown metric "{name}"{_show(original)}')

    if args.require_coverage:
        for family in REQUIRED_ON_DASHBOARD:
            if family not in on_dashboard:
                exported_note = "" if family in families else " (and not in the scrape)"
                problems.append(f'dashboard: no panel uses "{family}"{exported_note}')

    if problems:
        for problem in problems:
            print(f"check_expressions: {problem}")
        print(f"check_expressions: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_expressions: OK: {len(checked)} expressions ({len(rule_exprs)} in rules, "
          f"{len(dashboard_exprs)} in the dashboard), {len(used)} distinct metrics"
          + (f", {len(REQUIRED_ON_DASHBOARD)} issue-4 families on the dashboard"
             if args.require_coverage else "")
          + (f", {len(alerts)} alerts with a runbook in {args.alerting_doc}"
             if args.alerting_doc else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
