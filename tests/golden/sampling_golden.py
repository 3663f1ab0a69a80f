#!/usr/bin/python3
"""Golden sampling decisions from an independent XXH3 (Debian's python3-xxhash).

Writes tests/sampling/golden_sampled_rate005.txt: the indices i of the ids "req-<i>",
i in [0, 100000), with XXH3_64(id) < 0.05 * 2**64 (exact int/float comparison in Python),
and tests/sampling/golden_nested_rate005_r02.txt: those also admitted by a judge with rate 0.2
(threshold (0.2 * 0.05) * 2**64, docs/configuration.md, "Sampling")."""
import os
import xxhash

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sampling")
rate, judge_rate = 0.05, 0.2
sampled, nested = [], []
for i in range(100000):
    h = xxhash.xxh3_64_intdigest(f"req-{i}".encode())
    if h < rate * 2**64:
        sampled.append(i)
        if h < (judge_rate * rate) * 2**64:
            nested.append(i)
with open(os.path.join(here, "golden_sampled_rate005.txt"), "w") as f:
    f.write("\n".join(map(str, sampled)) + "\n")
with open(os.path.join(here, "golden_nested_rate005_r02.txt"), "w") as f:
    f.write("\n".join(map(str, nested)) + "\n")
print(len(sampled), len(nested))
print("xxh3_64('req-0') =", xxhash.xxh3_64_intdigest(b"req-0"))
print("xxh3_64('') =", xxhash.xxh3_64_intdigest(b""))
