#pragma once
/// `claim_support` (criterion faithfulness): a reference-free, claim-level support score of the
/// answer against the retrieved contexts, in [0, 1]. docs/claim-support.md has the method and
/// the full tables.
///
/// Method (tokens as judges/tokenizer.hpp gives them, stopwords out, light stemming):
///  1. Keys. A token's key is its light stem, except that number words and ordinals become
///     digits ("fourth", "4th" → "4"; "two" → "2", English and French up to twenty, the tens,
///     hundred … billion), so that a figure written two ways still matches.
///  2. Claims. The answer is cut by `sentenceSpans` (. ! ? before white space, not after an
///     abbreviation or before a lower-case word; 。！？ always; never at a colon or a line
///     break). Each sentence, citation markers removed, is one claim; the markers closing it
///     (and those before the next sentence's first word) are its citations.
///  3. Weights. A content token weighs 2 when it is a number, 1 otherwise, and 0 when its key
///     occurs in the question: what the question already gives is not a claim. Stopwords, a
///     lone lower-case letter (the pieces of "e.g.") and Chinese function characters (的 了 它
///     …) are not content. A claim whose weight is 0 is no claim.
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
///  5. Answer score = 1 − (1 − m) / √n, m = the n claims' support, mean weighted by Σ w: one
///     unsupported claim pulls m down by its share, and the shortfall of a long answer, which
///     paraphrases across many sentences, is normalised by √n.
///  6. When the answer cites (any marker) and a claim cites nothing, the score is × 0.3: a
///     sentence an attributing answer attributes to nothing is unsupported (ALCE's citation
///     recall, Gao et al. 2023, "Enabling Large Language Models to Generate Text with
///     Citations"; in ExpertQA all 64 such claims are labelled "Missing").
///  7. An answer whose content all comes from the question (it restates the question) scores
///     0.7: not fully supported.
///  8. The judge's score (combination: learned, the default) is not this formula but a logistic
///     regression over it and the other features below (claim_support_model.hpp), fitted on
///     the train events by scripts/train_claim_support: 1 − P(hallucinated). With
///     `combination: formula` the score is the formula's.
/// Abstentions (judges/abstention.hpp): sentences that decline or say the contexts do not cover
/// the question assert nothing and are left out; a hedge's asserted part is judged; an answer
/// that asserts nothing else is the outcome `abstained`.
/// Outcomes: `no_context` when no context has text (never faithfulness 1 without evidence),
/// `empty_input` when the answer has no content token.
/// Evidence: the first uncited claim with the count ("uncited (1 of 7 sentences cite no
/// context): …"), then the least-supported claim as written (≤ 200 bytes), its support and up
/// to 5 of its unsupported tokens, e.g. `least supported (0.69): "It costs 40 euros a month and
/// includes 50 GB"; unsupported: 50`.
///
/// Selection (docs/claim-support.md): the dev events were split by XXH3_64(id) < 2^63 (the
/// events a `sampling.rate: 0.5` samples: half A) and the rest (half B). Every constant above
/// (question weight 0, number weight 2, the 0.5/0.5 unigram/contiguous mix, √n, × 0.3 for an
/// uncited claim, 0.7 for a restated question, the 3-token negation scope, the sentence rules)
/// was the best of the variants tried on half A; nothing was fitted to half B or to the whole
/// set. ROC AUC of 1 − score for `labels.hallucinated`, pooled (BEGIN / ExpertQA / HaluEval /
/// Q²), and the share of events `run_if: below T` must escalate for 90 % recall:
///   half A (chosen on)  0.870 (0.841 / 0.842 / 0.955 / 0.813), 63.1 %
///   half B (held out)   0.859 (0.923 / 0.774 / 0.942 / 0.757), 65.5 %
///   pooled              0.864 (0.879 / 0.810 / 0.950 / 0.772), 66.4 %
///   context_overlap on half B: 0.834 (ExpertQA 0.638), 69.1 %.
/// Tried and dropped on half A: question words weighing above 0 (+0.02, all of it HaluEval's
/// copied-span artefact), the answer's length, the lowest claim in the aggregate, scoring a
/// sentence against the contexts it cites only, names weighing 2, the tokenizer's sentence
/// starts (colons, line breaks: −0.03).
/// The learned combination on the dev events (docs/claim-support.md, "The learned
/// combination"; train: 0.891): pooled 0.867 (0.882 / 0.852 / 0.947 / 0.771), 65.9 %.
/// Cost: one pass over the contexts and the answer; keys are 64-bit hashes in sorted vectors,
/// no allocation per token beyond the tokenizer's short strings: 39 µs per dev event on one
/// core (Google Benchmark, tests/bench/pipeline_bench.cpp BM_Judge).

#include <array>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "judges/judge.hpp"

namespace assay {

/// The answer-level features the learned combination weighs (claim_support_model.hpp), in
/// this order; their names are the weights file's `features`.
inline constexpr std::string_view kClaimFeatureNames[] = {
    "formula",              // the hand-set score of steps 5-7 above, [0, 1]
    "mean_support",         // m: the claims' support, weighted mean, [0, 1]
    "least_support",        // the lowest claim's support, [0, 1]
    "mean_unigram",         // the claims' u, weighted mean, [0, 1]
    "mean_pairs",           // the claims' b, weighted mean, [0, 1]
    "log_claims",           // ln(1 + claims)
    "uncited_share",        // claims without a marker in an answer that cites, / claims
    "cites",                // 1 when the answer carries a citation marker
    "number_unsupported",   // unsupported figures / figures (0 without figures)
    "log_numbers_missing",  // ln(1 + unsupported figures)
    "polarity_mismatch",    // tokens found in a context with the other polarity, / tokens
    "question_share",       // content tokens the question already has, / content tokens
    "restates_question",    // 1 when the answer only restates the question
    "abstaining_share",     // sentences that abstain (a hedge's asserted part is judged) / all
    "log_tokens",           // ln(1 + content tokens of the answer)
    "weak_claims",          // claims of support below 0.5, / claims
    "least_unigram",        // the lowest claim's u
    "name_unsupported",     // capitalised mid-sentence words not in a context, / such words
    "log_context_tokens",   // ln(1 + content tokens of the contexts)
};
inline constexpr std::size_t kClaimFeatureCount = std::size(kClaimFeatureNames);

/// One claim's support, for tests and the evidence line.
struct ClaimSupportDetail {
  double score = 0;  ///< the answer's score in [0, 1]; 0.7 when the answer restates the question
  bool restates_question = false;  ///< every content token of the answer is in the question
  bool empty = false;              ///< the answer has no content token at all
  /// Every sentence with a word abstains and asserts nothing (judges/abstention.hpp): the
  /// outcome `abstained`, no score.
  bool abstained = false;
  std::size_t abstaining = 0;       ///< sentences that abstain (a hedge's asserted part is judged)
  std::string abstaining_sentence;  ///< the first of them as written (≤ 200 bytes)
  std::size_t claims = 0;           ///< claims with a weight above 0
  double mean = 0;                  ///< the claims' support, mean weighted by their weight
  std::size_t uncited = 0;          ///< claims with no citation marker in an answer that has some
  std::string uncited_claim;        ///< the first of them as written (≤ 200 bytes)
  double least_score = 1;           ///< the lowest claim's support
  std::string least_claim;          ///< that claim as written in the answer (≤ 200 bytes)
  std::vector<std::string>
      unsupported;  ///< up to 5 of its unsupported tokens, as written (≤ 40 bytes each)
  std::vector<double> claim_scores;  ///< each claim's support, in the answer's order
  /// kClaimFeatureNames' values for this answer (all finite); zeros when empty or abstained.
  std::array<double, kClaimFeatureCount> features{};
};

/// Scores `answer` against `contexts` (texts, rank order irrelevant), `question`'s content
/// tokens weighing 0. Throws nothing; any UTF-8 input (invalid bytes separate words).
ClaimSupportDetail claimSupport(std::string_view question, std::string_view answer,
                                const std::vector<std::string_view>& contexts);

struct ClaimSupportModel;

/// The judge's score: the learned combination of the features (claim_support_model.hpp; the
/// built-in weights, or `weights: PATH`), or with `combination: formula` the hand-set score of
/// steps 5-7 (the feature `formula`).
class ClaimSupportJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  /// Options `combination` (learned | formula) and `weights` (a weights file; learned only).
  /// Throws OptionError naming the key (a weights file refused: its path and reason).
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  /// `model` null: the formula.
  explicit ClaimSupportJudge(std::shared_ptr<const ClaimSupportModel> model = nullptr)
      : model_(std::move(model)) {}
  Verdict judge(const Event& event) const override;

 private:
  std::shared_ptr<const ClaimSupportModel> model_;
};

/// `context_recall` (kind retrieval, criterion context_recall): RAGAS's context recall without a
/// model (Es et al. 2023, "RAGAS: Automated Evaluation of Retrieval Augmented Generation"): the
/// share of the reference answer's claims that the retrieved contexts support, each claim
/// scored by claimSupport() against the contexts (the question's own words weigh 0), a claim
/// counting as found when its support is at least kFound. A low recall with a faithful answer
/// is a retriever that missed what the answer needed; a high recall with an unfaithful answer
/// is a generator that did not use what it was given. Outcomes: `no_reference` without a
/// reference, `no_context` when no context has text, `empty_input` when the reference has no
/// claim beyond the question. Evidence: "3 of 4 reference claims found; least found (0.25):
/// \"…\"; missing: …".
class ContextRecallJudge final : public Judge {
 public:
  /// A reference claim is found when the contexts support it at least this much ((u + b) / 2,
  /// step 4 above): half of its weighted words and word pairs.
  static constexpr double kFound = 0.5;
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

}  // namespace assay
