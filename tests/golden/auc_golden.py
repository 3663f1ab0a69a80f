#!/usr/bin/python3
"""ROC AUC golden values from sklearn.metrics.roc_auc_score (Debian's python3-sklearn),
pasted into tests/cli/report_test.cpp."""
from sklearn.metrics import roc_auc_score

cases = [
    ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]),
    ([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]),
    ([1, 2, 2, 3, 3, 3, 4, 1, 2, 4], [0, 0, 1, 1, 0, 1, 1, 0, 0, 1]),
    ([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0, 0, 0, 1, 1, 1]),
    ([0.2, 0.2, 0.7, 0.1, 0.9, 0.3, 0.3, 0.65, 0.3, 0.05, 0.5, 0.5], [1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0]),
]
for s, l in cases:
    print(repr(roc_auc_score(l, s)))
