#!/usr/bin/python3
"""Golden values for tests/judges/bleu_test.cpp, from Debian's python3-nltk.

Sentence BLEU with uniform weights (1/N for BLEU-N) and SmoothingFunction().method1, on the
same token lists the C++ test uses (lower-case, space-separated ASCII words, so assay's
tokenize() yields exactly str.split()). Run:  /usr/bin/python3 tests/golden/bleu_golden.py
and paste the printed rows into kBleuGolden.
"""
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

# (hypothesis, [references], max_order)
CASES = [
    # partial matches, same length
    ("the cat sat on the mat", ["the cat is on the mat"], 4),
    # identical
    ("the quick brown fox jumps over the lazy dog",
     ["the quick brown fox jumps over the lazy dog"], 4),
    # shorter hypothesis: brevity penalty exp(1 - 8/5)
    ("the office opens at nine", ["the office opens at nine every day"], 4),
    # unigram matches only, every higher order smoothed
    ("nine at opens office the", ["the office opens at nine"], 4),
    # hypothesis shorter than 3 and 4: empty n-gram orders are smoothed as 0.1 / 1
    ("red car", ["the red car is fast"], 4),
    # three references (nltk's own docstring example)
    ("it is a guide to action which ensures that the military always obeys the commands of "
     "the party",
     ["it is a guide to action that ensures that the military will forever heed party commands",
      "it is the guiding principle which guarantees the military forces always being under the "
      "command of the party",
      "it is the practical guide for the army always to heed the directions of the party"], 4),
    # longer hypothesis than the reference: no brevity penalty
    ("the warranty covers water damage and fire damage for five full years",
     ["the warranty covers water damage for five years"], 4),
    # clipping of repeated words, two references
    ("the the the the the the the",
     ["the cat is on the mat", "there is a cat on the mat"], 4),
    # equidistant references (4 and 6 words for 5): the shorter one is r, so c > r, BP 1
    ("the office opens at ten", ["the office opens today", "our office opens at nine daily"], 4),
    # reordered clauses, trigrams match but few 4-grams
    ("he read the book because he was interested in world history",
     ["he was interested in world history because he read the book"], 4),
    # BLEU-2
    ("the plan costs thirty euros per month", ["the basic plan costs thirty euros a month"], 2),
    # BLEU-1, multiple references of different lengths
    ("approved after careful review",
     ["the request was approved", "approved", "denied after review"], 1),
    # BLEU-3, bigram matches but no trigram match
    ("water damage is covered by warranty", ["the warranty covers water damage"], 3),
    # the case: BLEU-1, BP exp(1 - 2/1)
    ("red", ["red car", "blue sky"], 1),
]


def main():
    smooth = SmoothingFunction().method1
    for hyp, refs, n in CASES:
        weights = tuple([1.0 / n] * n)
        score = sentence_bleu([r.split() for r in refs], hyp.split(), weights=weights,
                              smoothing_function=smooth)
        refs_cpp = ", ".join('"%s"' % r for r in refs)
        print('    {"%s", {%s}, %d, %r},' % (hyp, refs_cpp, n, float(score)))


if __name__ == "__main__":
    main()
