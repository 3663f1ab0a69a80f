#pragma once
/// Sentence BLEU. Source: Papineni et al., "BLEU: a Method for Automatic Evaluation of Machine
/// Translation", ACL 2002 (clipped n-gram precisions, geometric mean with uniform weights 1/N,
/// brevity penalty BP = 1 if c > r else exp(1 - r/c), r = the reference length closest to c,
/// the shorter one on a tie). Smoothing is nltk's `SmoothingFunction().method1` (Chen & Cherry,
/// WMT 2014, method 1): a precision with 0 matches becomes 0.1 / (number of candidate n-grams,
/// at least 1).
/// Threads: `sentenceBleu` keeps thread_local scratch; any number of threads may call it.
/// As nltk's `sentence_bleu`, the score is 0 when not a single unigram matches.

#include <span>
#include <string>
#include <vector>

#include "judges/judge.hpp"
#include "judges/tokenizer.hpp"

namespace assay {

/// Each reference and the hypothesis are token lists. Returns a value in [0, 1]; 0 for an empty
/// hypothesis or no reference. `max_order` N must be in [1, 8] (unchecked here; the judge's
/// `create` refuses other values).
double sentenceBleu(const std::vector<std::vector<std::string>>& references,
                    const std::vector<std::string>& hypothesis, int max_order = 4);
/// The same over `Words` (the judge's path; the overload above converts to it).
double sentenceBleu(std::span<const Words> references, const Words& hypothesis, int max_order = 4);

struct BleuJudgeOptions {
  int max_order = 4;  ///< N of BLEU-N, 1..8
};

/// Score = sentence BLEU of the answer against the event's one reference, in [0, 1]. Citation
/// markers ("[1]") are skipped on both sides. Outcome `no_reference` when the event has no
/// reference or its reference has no token.
class BleuJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit BleuJudge(BleuJudgeOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  BleuJudgeOptions options_;
};

}  // namespace assay
