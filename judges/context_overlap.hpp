#pragma once
/// Reference-free lexical proxies.
///
/// `context_overlap` (criterion faithfulness): the weighted share of the answer's content tokens
/// (stopwords removed, light suffix stemming) that occur somewhere in the retrieved contexts.
/// "Specific" tokens — numbers, dates, and capitalised words that do not start a sentence
/// (names) — weigh `specific_weight` (default 4) instead of 1, because a hallucinated figure or
/// name is the commonest RAG fault and a shared "the"/"is" must not hide it.
///   score = Σ w(t)·[t supported] / Σ w(t)  ∈ [0, 1]
/// Citation markers in the answer (`[1]`, `[2, 3]`, `[doc-7]`: brackets holding a digit) are
/// not claims and are left out.
/// Outcomes: `no_context` when the event has no context text (empty contexts must never yield
/// faithfulness 1), `empty_input` when the answer has no content token.
///
/// `question_overlap` (criterion answer_relevancy): share of the question's content tokens that
/// the answer repeats, in [0, 1]; `empty_input` when the question has no content token.
/// An empty answer scores 0.

#include <string>
#include <vector>

#include "judges/judge.hpp"

namespace assay {

/// Light suffix stripping used by the overlap judges: one of -ies -ing -ed -es -s -ly, then a
/// final -e ("leukemias" → "leukemia", "expires"/"expire"/"expired" → "expir", "studies" →
/// "study"); tokens of 4
/// code points or fewer are left alone.
std::string lightStem(std::string_view token);

struct ContextOverlapOptions {
  double specific_weight = 4.0;  ///< weight of numbers and names, ≥ 1
};

struct OverlapDetail {
  double score = 0;
  double supported_weight = 0, total_weight = 0;
  std::vector<std::string> unsupported_specific;  ///< numbers/names found in no context
};

/// Core of `context_overlap`; `total_weight` is 0 when the answer has no content token.
OverlapDetail contextOverlap(std::string_view answer, const std::vector<std::string>& contexts,
                             double specific_weight);

class ContextOverlapJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit ContextOverlapJudge(ContextOverlapOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  ContextOverlapOptions options_;
};

class QuestionOverlapJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

}  // namespace assay
