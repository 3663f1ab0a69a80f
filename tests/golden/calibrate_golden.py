#!/usr/bin/python3
"""Golden values for `assay calibrate` (daemon/calibrate.hpp) from scipy and sklearn (Debian's
python3-scipy, -sklearn), computed by an independent reading of the two input files with the
csv module. Prints the values pasted into tests/cli/calibrate_test.cpp.

  (a) tests/cli/data/calibrate_wide.csv, wide format, --min-score 1 --max-score 4
  (b) /work/shared/data/judge_human_pairs.csv (MT-Bench), long format:
      --item question_id,turn,model_a,model_b --annotator human_judge --human human_winner
      --judge llm_winner --levels model_a,tie,model_b

Definitions (docs/calibration.md): per item = the judge's score against the mean of the item's
human scores; per annotation = the judge's score against every human score; annotator kappa =
wide: the mean of the pairwise Cohen's kappas of the human columns (Light 1971); long: the first
against the second annotation (annotators ordered by name) of every item with two or more.
"""
import csv
import itertools
import math
import os
import sys
from collections import Counter, OrderedDict

from scipy import stats
from sklearn.metrics import cohen_kappa_score

HERE = os.path.dirname(os.path.abspath(__file__))


def load_wide(path, judge, humans, lo, hi):
    items = OrderedDict()
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    idx = {c: i for i, c in enumerate(header)}
    skipped = 0
    for row in rows[1:]:
        if len(row) != len(header):
            skipped += 1
            continue
        try:
            j = float(row[idx[judge]])
            hs = []
            for h in humans:
                cell = row[idx[h]].strip()
                if cell == "":
                    continue
                hs.append((h, float(cell)))
        except ValueError:
            skipped += 1
            continue
        if not hs or not all(lo <= v <= hi for v in [j] + [v for _, v in hs]):
            skipped += 1
            continue
        items[row[idx["item"]]] = (j, hs)
    return items, skipped


def load_long(path, item_cols, annotator, human, judge, levels):
    code = {name: i + 1 for i, name in enumerate(levels)}
    items = OrderedDict()
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            key = ",".join(r[c] for c in item_cols)
            j, h = code[r[judge]], code[r[human]]
            if key in items:
                assert items[key][0] == j, key
                items[key][1].append((r[annotator], h))
            else:
                items[key] = (j, [(r[annotator], h)])
    for key, (j, hs) in items.items():
        hs.sort()
    return items


def fmt(v):
    return "NAN" if v is None or v != v else repr(float(v))


def correlations(name, x, y):
    rho, p = stats.spearmanr(x, y)
    tau = stats.kendalltau(x, y, variant="b").statistic
    print(f"  {name}: n = {len(x)}, rho = {fmt(rho)}, p = {fmt(p)}, tau_b = {fmt(tau)}")


def kappas(a, b):
    return cohen_kappa_score(a, b), cohen_kappa_score(a, b, weights="quadratic")


def distribution(name, values, lo, hi):
    n = len(values)
    c = Counter(values)
    levels = int(hi - lo) + 1
    counts = [c.get(lo + i, 0) for i in range(levels)]
    entropy = stats.entropy(counts) / math.log(levels)
    print(f"  {name}: n = {n}, counts {lo:g}..{hi:g} = {counts}, mean = {fmt(sum(values) / n)}, "
          f"top = {fmt(c.get(hi, 0) / n)}, bottom = {fmt(c.get(lo, 0) / n)}, "
          f"entropy = {fmt(entropy)}")


def report(items, lo, hi, wide_columns=None):
    judge = [j for j, _ in items.values()]
    mean_h = [sum(v for _, v in hs) / len(hs) for _, hs in items.values()]
    rows_j = [j for j, hs in items.values() for _ in hs]
    rows_h = [v for _, hs in items.values() for _, v in hs]
    print(f"  items = {len(items)}, annotations = {len(rows_h)}")
    correlations("per item", judge, mean_h)
    correlations("per annotation", rows_j, rows_h)
    agree = sum(a == b for a, b in zip(rows_j, rows_h))
    print(f"  exact agreement = {agree} / {len(rows_h)} = {fmt(agree / len(rows_h))}")
    k, qk = kappas(rows_j, rows_h)
    print(f"  judge-human kappa = {fmt(k)}, quadratic = {fmt(qk)}")
    if wide_columns is not None:
        ks = []
        for a, b in itertools.combinations(wide_columns, 2):
            pa, pb = [], []
            for _, hs in items.values():
                d = dict(hs)
                if a in d and b in d:
                    pa.append(d[a])
                    pb.append(d[b])
            k, qk = kappas(pa, pb)
            ks.append(k)
            agree = sum(x == y for x, y in zip(pa, pb))
            print(f"  kappa {a} vs {b}: n = {len(pa)}, kappa = {fmt(k)}, quadratic = {fmt(qk)}, "
                  f"agree = {agree}")
        print(f"  Light's kappa = {fmt(sum(ks) / len(ks))}")
    else:
        multi = [hs for _, hs in items.values() if len(hs) >= 2]
        a = [hs[0][1] for hs in multi]
        b = [hs[1][1] for hs in multi]
        k, qk = kappas(a, b)
        agree = sum(x == y for x, y in zip(a, b))
        print(f"  first vs second: n = {len(a)}, kappa = {fmt(k)}, quadratic = {fmt(qk)}, "
              f"agree = {agree}, first annotators {Counter(h[0][0] for h in multi).most_common(2)}")
        shared = Counter()
        for _, hs in items.values():
            for (x, _), (y, _) in itertools.combinations(hs, 2):
                shared[(x, y)] += 1
        print(f"  most shared annotator pairs: {shared.most_common(3)}")
    distribution("judge (items)", judge, lo, hi)
    distribution("humans (annotations)", rows_h, lo, hi)


print("(a) tests/cli/data/calibrate_wide.csv --min-score 1 --max-score 4")
cols = ["human_1", "human_2", "human_3"]
wide, skipped = load_wide(os.path.join(HERE, "..", "cli", "data", "calibrate_wide.csv"),
                          "judge_score", cols, 1, 4)
print(f"  skipped rows = {skipped}")
report(wide, 1, 4, cols)

shared_dir = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data"
print("(b) judge_human_pairs.csv, long format, levels model_a,tie,model_b = 1,2,3")
mt = load_long(os.path.join(shared_dir, "judge_human_pairs.csv"),
               ["question_id", "turn", "model_a", "model_b"], "human_judge", "human_winner",
               "llm_winner", ["model_a", "tie", "model_b"])
report(mt, 1, 3)
