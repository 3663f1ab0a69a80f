#include "judges/judge.hpp"

#include <cmath>
#include <sstream>
#include <type_traits>

namespace assay {

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
