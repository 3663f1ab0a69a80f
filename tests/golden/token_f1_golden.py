#!/usr/bin/python3
"""Golden values for tests/judges/token_f1_test.cpp: the SQuAD v2.0 official evaluation
formula (normalize_answer, get_tokens and compute_f1 copied from `evaluate-v2.0.py`,
Rajpurkar et al.). Run:  /usr/bin/python3 tests/golden/token_f1_golden.py

The inputs avoid the two places where SQuAD's string-level punctuation removal and assay's
Unicode tokenizer legitimately differ: a hyphen or slash inside a word ("well-known" is one
SQuAD token "wellknown", two assay tokens) and a decimal point ("3.5" is SQuAD "35", assay
"3.5"). Thousands separators, apostrophes, commas and sentence punctuation agree.
"""
import collections
import re
import string


def normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


# (prediction = the answer, ground truth = the reference)
CASES = [
    ("The Eiffel Tower is in Paris.", "Paris"),
    ("a cat and the dog", "The dog and a cat"),
    ("the the cat cat cat", "cat sat on the mat"),
    ("Don't worry, it's fine!", "dont worry its fine"),
    ("Approximately 1,250 employees.", "1,250 employees"),
    ("Denver Broncos", "Carolina Panthers"),
    ("PARIS, France", "paris france"),
    ("An apple a day keeps the doctor away", "an apple every day keeps doctors away"),
    ("The warranty lasts five years and covers water damage.",
     "The warranty covers water damage for five years."),
    ("It was signed in 1998, in Kyoto (Japan).", "Kyoto, 1998"),
    ("New York, New York", "new york city"),
    ("the", "Paris"),
]


def main():
    for pred, truth in CASES:
        score = float(compute_f1(truth, pred))
        print('    {"%s", "%s", %r},' % (pred.replace('"', '\\"'), truth, score))


if __name__ == "__main__":
    main()
