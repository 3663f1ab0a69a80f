#include "core/verdict.hpp"

namespace assay {

std::string_view outcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kNoReference:
      return "no_reference";
    case Outcome::kNoContext:
      return "no_context";
    case Outcome::kNoGroundTruth:
      return "no_ground_truth";
    case Outcome::kNoContextIds:
      return "no_context_ids";
    case Outcome::kEmptyInput:
      return "empty_input";
    case Outcome::kNotApplicable:
      return "not_applicable";
    case Outcome::kSchemaError:
      return "schema_error";
    case Outcome::kTruncated:
      return "truncated";
    case Outcome::kRefused:
      return "refused";
    case Outcome::kRateLimited:
      return "rate_limited";
    case Outcome::kTimeout:
      return "timeout";
    case Outcome::kProviderError:
      return "provider_error";
    case Outcome::kSkippedBudget:
      return "skipped_budget";
    case Outcome::kContextTooLong:
      return "context_too_long";
    case Outcome::kJudgeError:
      return "judge_error";
    case Outcome::kTooLong:
      return "too_long";
    case Outcome::kAuthError:
      return "auth_error";
    case Outcome::kAbstained:
      return "abstained";
    case Outcome::kContextsTrimmed:
      return "contexts_trimmed";
    case Outcome::kCount_:
      break;
  }
  return "unknown";
}

}  // namespace assay
