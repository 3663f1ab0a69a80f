#pragma once
/// The `Judge` interface and its static descriptor. One judge type = one class implementing
/// `Judge`; every type is listed in judges/registry.cpp (no static self-registration).
/// Options flow as: YAML (config/ only) → `JudgeOptionValues` (typed, YAML-free) → the judge's
/// plain options struct → `create()`. The runtime never sees YAML.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "judges/event.hpp"
#include "judges/verdict.hpp"

namespace assay {

/// Config `kind:` of a judge. Checks are pass/fail; lexical and retrieval judges return a score
/// in [0, 1].
enum class JudgeKind { kCheck, kLexical, kRetrieval };
std::string_view judgeKindName(JudgeKind k);

/// How expensive one run is; decides scheduling (cheap judges run inline on the CPU pool).
enum class CostClass { kCpuMicroseconds, kCpuMilliseconds };

enum class OptionType { kInt, kNumber, kBool, kString, kStringList };

/// One judge-specific configuration key, e.g. `max_order` of `bleu`.
struct OptionSpec {
  std::string_view name;
  OptionType type;
  std::string_view description;  ///< shown by docs and in "unknown key" errors
};

struct JudgeDescriptor {
  std::string_view type;  ///< `check:` / `metric:` value in config, e.g. "rouge_l"
  JudgeKind kind;
  std::string_view criterion;   ///< what is measured, e.g. "faithfulness"; a metric label
  double min_score, max_score;  ///< score range; checks are 0 (fail) .. 1 (pass)
  std::vector<double> buckets;  ///< `assay_judge_score` histogram upper bounds for this scale
  std::span<const OptionSpec> options;
  CostClass cost;
  std::string_view summary;  ///< one line for docs and --help
};

/// `assay_judge_score` buckets shared by the judges of the same scale: deciles of [0, 1], and
/// pass/fail (0 or 1).
inline const std::vector<double> kUnitIntervalBuckets = {0.1, 0.2, 0.3, 0.4, 0.5,
                                                         0.6, 0.7, 0.8, 0.9, 1.0};
inline const std::vector<double> kPassFailBuckets = {0.0, 1.0};

using OptionValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::string>>;

/// A configuration error in one judge option, thrown by factories (control plane only).
/// `key` is the option name ("" for the judge as a whole); config/ maps it to FILE:LINE:COLUMN.
struct OptionError : std::runtime_error {
  OptionError(std::string key, const std::string& message)
      : std::runtime_error(message), key(std::move(key)) {}
  std::string key;
};

/// Judge-specific option values, already type-checked against the descriptor's `OptionSpec`s.
class JudgeOptionValues {
 public:
  void set(std::string name, OptionValue v) { values_[std::move(name)] = std::move(v); }
  bool has(std::string_view name) const { return values_.find(name) != values_.end(); }
  std::int64_t getInt(std::string_view name, std::int64_t dflt) const;
  double getNumber(std::string_view name, double dflt) const;  ///< an int value converts
  bool getBool(std::string_view name, bool dflt) const;
  std::string getString(std::string_view name, std::string dflt) const;
  std::vector<std::string> getStringList(std::string_view name) const;  ///< empty when absent

 private:
  std::map<std::string, OptionValue, std::less<>> values_;
};

/// A configured judge type. Implementations are immutable after construction and
/// `judge()` is safe to call from several worker threads at once.
class Judge {
 public:
  virtual ~Judge() = default;
  /// Judges one event. Never throws on any event content; an event the judge cannot judge
  /// yields a non-ok `Outcome`, never a stand-in score.
  virtual Verdict judge(const Event& event) const = 0;
};

}  // namespace assay
