#!/usr/bin/python3
"""OTLP/JSON ExportTraceServiceRequest (stdin) -> protobuf text format (stdout), for
`protoc --encode=assay.test.otlp.ExportTraceServiceRequest tests/data/otlp/otlp_trace.proto`.

Independent of assay's C++ reader: the tests compare what assay decodes from protoc's bytes
with what it decodes from the JSON. Hex ids become escaped bytes; int64 strings become
numbers; the field names are otlp_trace.proto's (snake_case)."""
import json
import sys


def q(s):
    return json.dumps(s, ensure_ascii=False)


def hexbytes(h):
    return '"' + "".join(f"\\x{h[i:i + 2]}" for i in range(0, len(h), 2)) + '"'


def value(v, ind):
    pad = " " * ind
    if "stringValue" in v:
        return f"{pad}string_value: {q(v['stringValue'])}\n"
    if "boolValue" in v:
        return f"{pad}bool_value: {'true' if v['boolValue'] else 'false'}\n"
    if "intValue" in v:
        return f"{pad}int_value: {int(v['intValue'])}\n"
    if "doubleValue" in v:
        return f"{pad}double_value: {float(v['doubleValue'])!r}\n"
    if "arrayValue" in v:
        out = f"{pad}array_value {{\n"
        for x in v["arrayValue"].get("values", []):
            out += f"{pad}  values {{\n{value(x, ind + 4)}{pad}  }}\n"
        return out + f"{pad}}}\n"
    if "kvlistValue" in v:
        out = f"{pad}kvlist_value {{\n"
        for kv in v["kvlistValue"].get("values", []):
            out += f"{pad}  values {{\n{keyvalue(kv, ind + 4)}{pad}  }}\n"
        return out + f"{pad}}}\n"
    return ""


def keyvalue(kv, ind):
    pad = " " * ind
    return f"{pad}key: {q(kv['key'])}\n{pad}value {{\n{value(kv.get('value', {}), ind + 2)}{pad}}}\n"


def attributes(attrs, ind, name="attributes"):
    pad = " " * ind
    return "".join(f"{pad}{name} {{\n{keyvalue(kv, ind + 2)}{pad}}}\n" for kv in attrs)


req = json.load(sys.stdin)
out = ""
for rs in req.get("resourceSpans", []):
    out += "resource_spans {\n"
    if "resource" in rs:
        out += "  resource {\n" + attributes(rs["resource"].get("attributes", []), 4) + "  }\n"
    for ss in rs.get("scopeSpans", []):
        out += "  scope_spans {\n"
        if "scope" in ss:
            out += f"    scope {{\n      name: {q(ss['scope'].get('name', ''))}\n    }}\n"
        for sp in ss.get("spans", []):
            out += "    spans {\n"
            out += f"      trace_id: {hexbytes(sp['traceId'])}\n      span_id: {hexbytes(sp['spanId'])}\n"
            if sp.get("parentSpanId"):
                out += f"      parent_span_id: {hexbytes(sp['parentSpanId'])}\n"
            out += f"      name: {q(sp.get('name', ''))}\n      kind: {int(sp.get('kind', 0))}\n"
            out += f"      start_time_unix_nano: {int(sp['startTimeUnixNano'])}\n"
            out += f"      end_time_unix_nano: {int(sp['endTimeUnixNano'])}\n"
            out += attributes(sp.get("attributes", []), 6)
            out += "    }\n"
        out += "  }\n"
    out += "}\n"
sys.stdout.write(out)
