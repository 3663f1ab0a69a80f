#!/usr/bin/python3
"""Golden nDCG@k values for tests/judges/retrieval_test.cpp, from Debian's python3-sklearn
(sklearn.metrics.ndcg_score). Run:  /usr/bin/python3 tests/golden/ndcg_golden.py

The retrieved list is scored in rank order (rank 1 gets the highest score, no ties) and
y_true is binary relevance of each retrieved chunk. sklearn's ideal DCG is computed from the
scored items only, while assay's counts every ground-truth id (min(k, |relevant|) ideal hits),
so the two agree only when every relevant id appears among the retrieved chunks: every case
below satisfies that (checked by the assert).
"""
import numpy as np
from sklearn.metrics import ndcg_score

# (retrieved ids in rank order, relevant ids, k)
CASES = [
    (["d1", "d2", "d3", "d4", "d5"], ["d2", "d4"], 5),
    (["d1", "d2", "d3", "d4", "d5"], ["d1"], 3),
    (["d1", "d2", "d3", "d4", "d5"], ["d5"], 5),
    (["d1", "d2", "d3", "d4", "d5"], ["d3", "d5", "d1"], 5),
    (["d1", "d2", "d3", "d4", "d5"], ["d3", "d5", "d1"], 3),
    (["d1", "d2", "d3", "d4", "d5", "d6"], ["d6", "d2"], 4),
    (["a", "b", "c"], ["c", "b"], 10),
    (["a", "b", "c", "d", "e", "f", "g", "h"], ["b", "e", "g", "h"], 8),
]


def main():
    for retrieved, relevant, k in CASES:
        assert set(relevant) <= set(retrieved)
        y_true = np.asarray([[1.0 if r in relevant else 0.0 for r in retrieved]])
        y_score = np.asarray([[float(len(retrieved) - i) for i in range(len(retrieved))]])
        score = ndcg_score(y_true, y_score, k=k)
        ret = ", ".join('"%s"' % r for r in retrieved)
        rel = ", ".join('"%s"' % r for r in relevant)
        print("    {{%s}, {%s}, %d, %r}," % (ret, rel, k, float(score)))


if __name__ == "__main__":
    main()
