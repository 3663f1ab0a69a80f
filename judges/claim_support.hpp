#pragma once
/// `claim_support` (criterion faithfulness): a reference-free, claim-level support score of the
/// answer against the retrieved contexts, in [0, 1]. docs/claim-support.md has the method and
/// the full tables.
///
/// Method (tokens as judges/tokenizer.hpp gives them, stopwords out, light stemming):
///  1. Keys. A token's key is its light stem, except that number words and ordinals become
///     digits ("fourth", "4th" → "4"; "two" → "2", English and French up to twenty, the tens,
///     hundred … billion), so that a figure written two ways still matches.
///  2. Claims. The answer, citation markers removed, is cut into sentences (the tokenizer's
///     sentence starts: . ! ? : 。 or a newline). Each sentence is one claim.
///  3. Weights. A content token weighs 4 when it is a number (as `context_overlap`), 1
///     otherwise, and 0 when its key occurs in the question: what the question already gives is
///     not a claim. A claim whose weight is 0 is no claim.
///  4. Support of a claim c with weights w_i over its content tokens t_1…t_n:
///       u(c) = Σ w_i·s_i / Σ w_i                       (unigram support)
///       b(c) = Σ v_i·s_i·s_{i+1}·p_i / Σ v_i,  v_i = max(w_i, w_{i+1})   (contiguous support)
///       claim(c) = (u + b) / 2    (b = u when the claim has one content token)
///     s_i = 1 when t_i's key occurs in some context and its polarity agrees: a token with a
///     negation ("not", "never", "n't", "ne … pas"…) among the 3 tokens before it is unsupported
///     when no context occurrence of it is negated, and an un-negated one is unsupported when
///     every context occurrence is negated ("does not cover water damage" against "covers
///     water damage"). p_i = 1 when t_i and t_{i+1} also occur as neighbours in one context:
///     at most one content token and at most 3 tokens between them (a word order the
///     contexts attest, not a bag of words).
///  5. Answer score = 0.4 · (claims' mean weighted by Σ w) + 0.6 · (the lowest claim), so that
///     a single unsupported claim pulls the answer down. An answer whose content all comes from
///     the question (it restates the question) scores 0.5: not fully supported.
/// Outcomes: `no_context` when no context has text (never faithfulness 1 without evidence),
/// `empty_input` when the answer has no content token.
/// Evidence: the least-supported claim as written (≤ 200 bytes), its score, and up to 5 of its
/// unsupported tokens, e.g. `least supported (0.62): "It costs 40 euros a month and includes
/// 50 GB"; unsupported: 50`.
///
/// Selection (docs/claim-support.md): the dev events were split by XXH3_64(id) < 2^63 (the
/// events a `sampling.rate: 0.5` samples: half A) and the rest (half B). Every constant above
/// (question weight 0, the 0.5/0.5 unigram/contiguous mix, 0.6 on the lowest claim, the
/// 3-token negation scope, number words) was the best of the variants tried on half A; nothing
/// was fitted to half B or to the whole set. ROC AUC of 1 − score for `labels.hallucinated`,
/// pooled (BEGIN / ExpertQA / HaluEval / Q²), and the share of events `run_if: below T` must
/// escalate for 90 % recall of the hallucinations:
///   half A (chosen on)  0.826 (0.876 / 0.709 / 0.927 / 0.782), 67.8 %
///   half B (held out)   0.829 (0.934 / 0.628 / 0.939 / 0.774), 67.3 %
///   pooled              0.829 (0.894 / 0.667 / 0.935 / 0.769), 68.2 %
///   context_overlap on half B: 0.834, 69.1 %: no better on held-out events; what this judge adds
///   is the cases a bag of words misses (negation, one invented sentence, a restated question,
///   figures as words) and evidence that names the sentence.
/// Tried and dropped on half A: scoring each sentence against the contexts it cites, or
/// against the best window of 1–3 context sentences instead of all contexts (both −0.01),
/// short sentences left out of the minimum, a log-length penalty.
/// Cost: one pass over the contexts and the answer; keys are 64-bit hashes in sorted vectors,
/// no allocation per token beyond the tokenizer's short strings: 84 µs per dev event on one
/// core (Google Benchmark, tests/bench/pipeline_bench.cpp BM_Judge).

#include <string>
#include <string_view>
#include <vector>

#include "judges/judge.hpp"

namespace assay {

/// One claim's support, for tests and the evidence line.
struct ClaimSupportDetail {
  double score = 0;  ///< the answer's score in [0, 1]; 0.5 when the answer restates the question
  bool restates_question = false;  ///< every content token of the answer is in the question
  bool empty = false;              ///< the answer has no content token at all
  std::size_t claims = 0;          ///< claims with a weight above 0
  double least_score = 1;          ///< the lowest claim's support
  std::string least_claim;         ///< that claim as written in the answer (≤ 200 bytes)
  std::vector<std::string>
      unsupported;  ///< up to 5 of its unsupported tokens, as written (≤ 40 bytes each)
};

/// Scores `answer` against `contexts` (texts, rank order irrelevant), `question`'s content
/// tokens weighing 0. Throws nothing; any UTF-8 input (invalid bytes separate words).
ClaimSupportDetail claimSupport(std::string_view question, std::string_view answer,
                                const std::vector<std::string_view>& contexts);

class ClaimSupportJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

}  // namespace assay
