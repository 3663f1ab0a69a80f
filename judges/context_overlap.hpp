#pragma once
/// Reference-free lexical proxies.
///
/// `context_overlap` (criterion faithfulness): the weighted share of the answer's content tokens
/// (stopwords removed, light suffix stemming) that occur somewhere in the retrieved contexts.
/// Numbers and dates weigh `number_weight` (default 4), other words 1: a hallucinated figure is
/// the commonest RAG fault, and a shared "the"/"is" must not hide it. Names — capitalised words
/// that do not start a sentence — weigh `name_weight`, default 1 (see below).
///   score = Σ w(t)·[t supported] / Σ w(t)  ∈ [0, 1]
/// The defaults were measured on the labelled dev events (ROC AUC of 1 − score for
/// `labels.hallucinated`, 437 events, pooled; per dataset BEGIN / ExpertQA / HaluEval / Q²):
///   (number, name) = (1, 1): 0.828 (0.927 / 0.635 / 0.923 / 0.776)
///                    (4, 1): 0.828 (0.931 / 0.635 / 0.923 / 0.771)
///                    (4, 2): 0.821 (0.926 / 0.623 / 0.923 / 0.771)
///                    (4, 4): 0.811 (0.912 / 0.607 / 0.923 / 0.771)
/// Weighting figures costs nothing and catches a wrong number; weighting capitalised words
/// hurts everywhere (capitalisation is a noisy name detector: titles, brands, dialogue), so
/// names are off by default and left as an option.
/// Citation markers in the answer (`[1]`, `[2, 3]`, `[doc-7]`: brackets holding a digit) are
/// not claims and are left out.
/// Outcomes: `no_context` when the event has no context text (empty contexts must never yield
/// faithfulness 1), `empty_input` when the answer has no content token.
///
/// `question_overlap` (criterion answer_relevancy): share of the question's content tokens that
/// the answer repeats, in [0, 1]; `empty_input` when the question has no content token.
/// An empty answer scores 0.

#include <string>
#include <string_view>
#include <vector>

#include "judges/judge.hpp"

namespace assay {

/// Light suffix stripping used by the overlap judges: one of -ies -ing -ed -es -s -ly, then a
/// final -e ("leukemias" → "leukemia", "expires"/"expire"/"expired" → "expir", "studies" →
/// "study"); tokens of 4
/// code points or fewer are left alone.
std::string lightStem(std::string_view token);

struct ContextOverlapOptions {
  double number_weight = 4.0;  ///< weight of a token with a digit, in [1, 100]
  double name_weight = 1.0;    ///< weight of a capitalised word that does not start a sentence
};

struct OverlapDetail {
  double score = 0;
  double supported_weight = 0, total_weight = 0;
  std::vector<std::string> unsupported_specific;  ///< numbers/names found in no context
};

/// Core of `context_overlap`; `total_weight` is 0 when the answer has no content token.
OverlapDetail contextOverlap(std::string_view answer, const std::vector<std::string_view>& contexts,
                             const ContextOverlapOptions& weights);

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
