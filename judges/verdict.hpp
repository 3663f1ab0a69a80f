#pragma once
/// What one judge concluded about one event (CONTRACT.md §3, one element of `verdicts`).

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
  kCount_,         // number of outcomes; keep last
};

inline constexpr int kOutcomeCount = static_cast<int>(Outcome::kCount_);

/// Stable snake_case name used in metrics (`outcome` label) and in the JSON `error` field.
std::string_view outcomeName(Outcome o);

struct Verdict {
  Outcome outcome = Outcome::kOk;
  std::optional<double> score;  ///< present iff outcome == kOk; within [min, max] of the judge
  std::optional<bool> passed;   ///< checks only: the pass/fail result (score 1 = passed)
  std::string evidence;         ///< short, human-readable why (may be empty)

  static Verdict ok(double score, std::string evidence = {}) {
    return Verdict{Outcome::kOk, score, std::nullopt, std::move(evidence)};
  }
  static Verdict check(bool passed, std::string evidence = {}) {
    return Verdict{Outcome::kOk, passed ? 1.0 : 0.0, passed, std::move(evidence)};
  }
  static Verdict fail(Outcome why, std::string evidence = {}) {
    return Verdict{why, std::nullopt, std::nullopt, std::move(evidence)};
  }
};

}  // namespace assay
