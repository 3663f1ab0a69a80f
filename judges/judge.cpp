#include "judges/judge.hpp"

#include <cmath>
#include <sstream>
#include <type_traits>

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

std::string_view judgeKindName(JudgeKind k) {
  switch (k) {
    case JudgeKind::kCheck:
      return "check";
    case JudgeKind::kLexical:
      return "lexical";
    case JudgeKind::kRetrieval:
      return "retrieval";
    case JudgeKind::kLlm:
      return "llm";
  }
  return "unknown";
}

std::int64_t JudgeOptionValues::getInt(std::string_view name, std::int64_t dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected an integer");
}

double JudgeOptionValues::getNumber(std::string_view name, double dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  throw OptionError(std::string(name), "expected a number");
}

bool JudgeOptionValues::getBool(std::string_view name, bool dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<bool>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected true or false");
}

std::string JudgeOptionValues::getString(std::string_view name, std::string dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected a string");
}

std::vector<std::string> JudgeOptionValues::getStringList(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return {};
  if (auto* v = std::get_if<std::vector<std::string>>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected a list of strings");
}

const OptionTree* JudgeOptionValues::getTree(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return nullptr;
  if (auto* v = std::get_if<OptionTree>(&it->second)) return v;
  throw OptionError(std::string(name), "expected a mapping or a list");
}

namespace {

template <typename T>
T checkedRange(std::string_view name, T v, T lo, T hi) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      std::ostringstream m;
      m << "must be a finite number between " << lo << " and " << hi;
      throw OptionError(std::string(name), m.str());
    }
  }
  if (v < lo || v > hi) {
    std::ostringstream m;
    m << "must be between " << lo << " and " << hi;
    throw OptionError(std::string(name), m.str());
  }
  return v;
}

}  // namespace

std::int64_t JudgeOptionValues::getIntIn(std::string_view name, std::int64_t dflt, std::int64_t lo,
                                         std::int64_t hi) const {
  return checkedRange(name, getInt(name, dflt), lo, hi);
}

double JudgeOptionValues::getNumberIn(std::string_view name, double dflt, double lo,
                                      double hi) const {
  return checkedRange(name, getNumber(name, dflt), lo, hi);
}

const OptionTree* OptionTree::find(std::string_view key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& e : map)
    if (e.key == key) return &e.value;
  return nullptr;
}

JudgeInfo descriptorInfo(const JudgeDescriptor& d) {
  return JudgeInfo{std::string(d.criterion), d.min_score, d.max_score, d.buckets,
                   d.kind != JudgeKind::kCheck};
}

}  // namespace assay
