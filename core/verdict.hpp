#pragma once
/// What one judge concluded about one event (docs/events.md, "Judgment output": one element of
/// `verdicts`).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace assay {

/// Why a judge produced (or did not produce) a score. Anything but kOk carries no score:
/// a judge that cannot judge never stands in a 0, a 1 or a NaN for "could not judge".
enum class Outcome {
  kOk = 0,
  kNoReference,    ///< lexical judge, event has no `reference`
  kNoContext,      ///< judge needs contexts, event has none
  kNoGroundTruth,  ///< retrieval judge, event has no `relevant_context_ids`
  kNoContextIds,   ///< retrieval judge, contexts carry no ids to match
  kEmptyInput,     ///< the text to judge is empty (or has no content tokens)
  kNotApplicable,  ///< the judge does not apply to this event (e.g. json_valid on a text answer)
  // LLM judges (judges/llm/llm_judge.hpp has the details)
  kSchemaError,     ///< the judge's reply is not a valid verdict object
  kTruncated,       ///< the reply hit max_tokens
  kRefused,         ///< the judge model declined
  kRateLimited,     ///< the provider asked to wait longer than max_retry_wait_ms
  kTimeout,         ///< no reply within timeout_ms, every attempt
  kProviderError,   ///< HTTP or connection failure after retries
  kSkippedBudget,   ///< the daily budget (or its store) did not allow the call
  kContextTooLong,  ///< question + answer exceed max_input_tokens; no call made
  kJudgeError,      ///< the judge threw (a bug, logged): the event's other verdicts stand
  kTooLong,         ///< the input is larger than the judge scores in bounded time (e.g. ROUGE-L's
                    ///< LCS over more than kMaxLcsCells token pairs)
  kAuthError,       ///< LLM judge: the provider refused the API key (HTTP 401 or 403)
  kAbstained,       ///< LLM judge: the reply was {"score": null, "justification": why}
  /// LLM faithfulness judge: the contexts were trimmed to max_input_tokens, so a claim the
  /// judge found unsupported may be supported by a context left out; the score is not
  /// counted (the justification says what it was) unless the judge sets `score_trimmed`
  kContextsTrimmed,
  kCount_,  // number of outcomes; keep last
};

inline constexpr int kOutcomeCount = static_cast<int>(Outcome::kCount_);

/// Stable snake_case name used in metrics (`outcome` label) and in the JSON `error` field.
std::string_view outcomeName(Outcome o);

struct Verdict {
  Outcome outcome = Outcome::kOk;
  std::optional<double> score;  ///< present iff outcome == kOk; within [min, max] of the judge
  std::optional<bool> passed;   ///< checks only: the pass/fail result (score 1 = passed)
  std::string evidence;         ///< short, human-readable why (may be empty)
  /// LLM judges only: the call's model and cost (docs/events.md: `model`, `input_tokens`,
  /// `output_tokens`, `cost_eur`); `model` empty for other judges.
  std::string model;
  std::int64_t input_tokens = 0, output_tokens = 0;
  double cost_eur = 0;
  bool contexts_truncated = false;  ///< LLM: lower-ranked contexts were left out of the prompt
  /// LLM: re-emitted from the verdict store for a redelivered event (no call, no charge).
  bool stored = false;
  /// LLM: the reply reported no usage; input/output_tokens and cost_eur are the estimate
  /// charged (prompt estimate in, max_tokens out), not the provider's count.
  bool tokens_estimated = false;

  static Verdict ok(double score, std::string evidence = {}) {
    Verdict v;
    v.score = score;
    v.evidence = std::move(evidence);
    return v;
  }
  static Verdict check(bool passed, std::string evidence = {}) {
    Verdict v = ok(passed ? 1.0 : 0.0, std::move(evidence));
    v.passed = passed;
    return v;
  }
  static Verdict fail(Outcome why, std::string evidence = {}) {
    Verdict v;
    v.outcome = why;
    v.evidence = std::move(evidence);
    return v;
  }
};

}  // namespace assay
