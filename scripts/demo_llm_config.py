#!/usr/bin/python3
"""Writes the demo configuration with an LLM faithfulness judge added (used by scripts/demo).

usage: demo_llm_config.py BASE.yaml OUT.yaml
Environment: OPENAI_API_KEY (OpenAI), or ASSAY_LLM_ENDPOINT (+ ASSAY_LLM_MODEL) for any
OpenAI-compatible server; ASSAY_DEMO_BUDGET_EUR caps the demo's spend (default 0.50).
The judge runs only where claim_support is below 0.8 (the cheap judge escalates:
docs/claim-support.md)."""
import json
import os
import sys

base, out = sys.argv[1], sys.argv[2]
model = os.environ.get("ASSAY_LLM_MODEL", "gpt-4o-mini")
endpoint = os.environ.get("ASSAY_LLM_ENDPOINT", "https://api.openai.com/v1")
has_key = bool(os.environ.get("OPENAI_API_KEY"))
cap = float(os.environ.get("ASSAY_DEMO_BUDGET_EUR", "0.50"))

text = open(base).read()
budget = f"budget:\n  daily_limit_eur: {cap}\n  store: memory\n"
if os.environ.get("ASSAY_LLM_ENDPOINT") and not has_key:
    # A local server (Ollama, vLLM, llama.cpp) with a model outside the price table costs nothing.
    budget += f"  prices: {{{json.dumps(model)}: {{input: 0, output: 0}}}}\n"
judge = ("  - name: faithfulness_llm\n"
         "    kind: llm\n"
         "    criterion: faithfulness\n"
         f"    endpoint: {json.dumps(endpoint)}\n"
         f"    model: {json.dumps(model)}\n"
         + ("    api_key_env: OPENAI_API_KEY\n" if has_key else "")
         + "    max_in_flight: 4\n"
         "    run_if: [{judge: claim_support, below: 0.6}]\n")
head, sep, tail = text.partition("tracking:")
text = head.rstrip("\n") + "\n" + judge + sep + tail
text = text.replace("judges:\n", budget + "judges:\n", 1)
open(out, "w").write(text)
print(f"{model} via {endpoint}, capped at EUR {cap:.2f} for the demo")
