#!/usr/bin/python3
"""Golden values for tracking/ from scipy and sklearn (Debian's python3-scipy, -sklearn).
Prints C++ initialisers pasted into tests/tracking/stats_test.cpp."""
import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score

pairs = [
    ([4, 2, 3, 4, 1, 3, 2, 4, 3, 2], [4, 2, 4, 3, 1, 3, 3, 4, 2, 2]),
    ([2, 2, 2, 3, 4], [4, 3, 2, 2, 1]),
    ([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]),
    ([1, 1, 2, 2, 3, 3, 4, 4], [1, 2, 1, 3, 2, 4, 3, 4]),
    ([3, 3, 3, 3, 4, 4, 1, 2, 2, 1, 4, 3], [3, 4, 3, 2, 4, 4, 1, 1, 2, 2, 3, 3]),
    ([1, 4, 2, 4, 3, 1, 2, 3, 4, 4, 1], [2, 4, 2, 3, 3, 1, 1, 3, 4, 3, 2]),
    ([4, 4, 4, 4, 3, 4, 4, 2, 4, 4], [4, 3, 4, 4, 3, 4, 2, 2, 4, 3]),
    ([1, 2, 1, 2, 1, 2, 1, 2, 1, 2], [2, 1, 2, 1, 2, 2, 1, 1, 2, 1]),
    ([5, 3, 4, 2, 1, 5, 4, 3, 2, 1, 3, 3, 4], [4, 3, 5, 2, 2, 5, 3, 3, 1, 1, 4, 2, 4]),
    ([0.9, 0.5, 0.5, 0.2, 0.7, 0.7, 0.1, 0.3], [0.8, 0.6, 0.4, 0.2, 0.9, 0.7, 0.1, 0.1]),
    ([2, 3, 2, 3, 2, 3, 4, 4, 1, 1, 2, 3, 4, 1], [3, 3, 2, 2, 2, 4, 4, 3, 1, 2, 2, 3, 4, 1]),
]
print("// x, y, spearman rho, spearman p, kendall tau-b, kappa, quadratic kappa (NaN = n/a)")
for x, y in pairs:
    rho, p = stats.spearmanr(x, y)
    tau = stats.kendalltau(x, y, variant="b").statistic
    ints = all(float(v).is_integer() for v in x + y)
    k = cohen_kappa_score(x, y) if ints else float("nan")
    qk = cohen_kappa_score(x, y, weights="quadratic") if ints else float("nan")
    fmt = lambda v: "NAN" if v != v else repr(float(v))
    print(f"  {{{{{', '.join(map(str, x))}}}, {{{', '.join(map(str, y))}}}, {fmt(rho)}, {fmt(p)}, {fmt(tau)}, {fmt(k)}, {fmt(qk)}}},")

print("// Mann-Whitney U (two-sided, asymptotic, tie correction, continuity correction): x, y, U1, p")
mw = [
    ([4, 4, 3, 4, 4, 3, 4, 4, 3, 4], [2, 3, 2, 2, 3, 2, 3, 2, 2, 3]),
    ([1, 2, 3, 4, 5, 6, 7], [3, 4, 5, 6, 7, 8, 9, 10]),
    ([3, 3, 3, 4, 4, 2, 3, 4], [3, 4, 3, 3, 2, 4, 3, 3, 4]),
    ([1, 1, 1, 2], [1, 2, 2, 2, 2]),
    ([0.2, 0.4, 0.4, 0.9, 0.1, 0.5], [0.3, 0.8, 0.8, 0.7, 0.6]),
]
for x, y in mw:
    r = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True)
    print(f"  {{{{{', '.join(map(str, x))}}}, {{{', '.join(map(str, y))}}}, {float(r.statistic)!r}, {float(r.pvalue)!r}}},")

print("// chi-square of independence (Pearson, no Yates correction): table, statistic, dof, p")
tables = [
    [[10, 20, 30], [20, 20, 20]],
    [[5, 9, 12, 20, 30], [7, 8, 15, 18, 25]],
    [[30, 10], [10, 30]],
]
for t in tables:
    c, p, dof, _ = stats.chi2_contingency(np.array(t), correction=False)
    rows = ", ".join("{" + ", ".join(map(str, r)) + "}" for r in t)
    print(f"  {{{{{rows}}}, {float(c)!r}, {dof}, {float(p)!r}}},")

print("// Student t 97.5 % quantiles for n-1 df, n = 2..30")
print("  " + ", ".join(repr(float(stats.t.ppf(0.975, n - 1))) for n in range(2, 31)))
