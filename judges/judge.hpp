#pragma once
/// The `Judge` interface and its static descriptor. One judge type = one class implementing
/// `Judge`; every type is listed in judges/registry.cpp (no static self-registration).
/// Options flow as: YAML (config/ only) → `JudgeOptionValues` (typed, YAML-free) → the judge's
/// plain options struct → `create(values, context)`. The runtime never sees YAML.
///
/// A judge is synchronous (checks, lexical and retrieval judges: `judge()` on a worker, in
/// microseconds) or asynchronous (cost class kRemoteCall, the LLM judges: `judgeAsync()` returns
/// at once and the verdict arrives later on another thread). The judge runner calls every
/// synchronous judge of an event first, in configuration order, then the asynchronous ones.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/event.hpp"
#include "core/judge_version.hpp"
#include "core/verdict.hpp"

namespace assay {

struct BudgetOptions;
class JudgeServices;

/// Config `kind:` of a judge. Checks are pass/fail; lexical and retrieval judges return a score
/// in [0, 1]; an LLM judge scores on its rubric's scale.
enum class JudgeKind { kCheck, kLexical, kRetrieval, kLlm };
std::string_view judgeKindName(JudgeKind k);

/// How expensive one run is; decides scheduling: CPU judges run inline on a worker, in
/// configuration order; kRemoteCall judges are asynchronous (`judgeAsync`) and start after them.
enum class CostClass { kCpuMicroseconds, kCpuMilliseconds, kRemoteCall };

/// kTree: a nested mapping or list as written in YAML (`OptionTree`), for options with
/// structure such as an LLM judge's `rubric`.
enum class OptionType { kInt, kNumber, kBool, kString, kStringList, kTree };

/// One judge-specific configuration key, e.g. `max_order` of `bleu`.
struct OptionSpec {
  std::string_view name;
  OptionType type;
  std::string_view description;  ///< shown by docs and in "unknown key" errors
  /// The option can change the judge's scores, so it is part of the judge's version
  /// (judgeVersion): false for what only changes how calls are made (keys, timeouts,
  /// concurrency, rate limits, retries, budget caps, batching).
  bool scoring = true;
  /// The value the judge takes when the option is not written, as judgeVersionOf writes it
  /// (numbers in their shortest form, booleans true/false, strings quoted: "\"openai\""); ""
  /// when there is none or it depends on other options. Writing the default out explicitly
  /// then gives the same version as leaving it out (tests/judges/registry_compliance_test
  /// checks each).
  std::string_view default_value = "";
  /// The option names a file whose content scores (a weights file): the version's field is
  /// the path and a digest of the file's bytes (XXH3, at most 16 MiB read), so editing the file
  /// in place starts a new version as a new path would.
  bool file_digest = false;
};

/// What a local judge answers when it cannot judge an event: the default `outcomes` of a
/// descriptor.
inline constexpr Outcome kCannotJudgeOutcomes[] = {
    Outcome::kNoReference,  Outcome::kNoContext,  Outcome::kNoGroundTruth,
    Outcome::kNoContextIds, Outcome::kEmptyInput, Outcome::kNotApplicable};

/// A faithfulness judge's: the above, and `abstained` for an answer that declines or says the
/// contexts do not cover the question (judges/abstention.hpp).
inline constexpr Outcome kFaithfulnessOutcomes[] = {
    Outcome::kNoReference, Outcome::kNoContext,     Outcome::kNoGroundTruth, Outcome::kNoContextIds,
    Outcome::kEmptyInput,  Outcome::kNotApplicable, Outcome::kAbstained};

class JudgeOptionValues;

struct JudgeDescriptor {
  /// `check:` / `metric:` value in config, e.g. "rouge_l"; for a kind with a single type and
  /// no type key (`kind: llm`), the kind's name.
  std::string_view type;
  JudgeKind kind;
  /// What is measured, e.g. "faithfulness" (a metric label); empty when an option of the
  /// judge chooses it (an LLM judge's `criterion`): then `JudgeFactory::info` tells.
  std::string_view criterion;
  double min_score, max_score;  ///< score range; checks are 0 (fail) .. 1 (pass)
  std::vector<double> buckets;  ///< `assay_judge_score` histogram upper bounds for this scale
  std::span<const OptionSpec> options;
  CostClass cost;
  std::string_view summary;  ///< one line for docs and --help
  /// Outcomes besides `ok` this type can produce: their `assay_judge_runs_total` series exist
  /// from the start (at 0), so that rate() and alerts see them before the first one.
  std::span<const Outcome> outcomes = kCannotJudgeOutcomes;
  /// What else changes the type's scores besides its options, bumped with the code that does
  /// (the LLM judge's prompt template): part of every version of the type (judgeVersion).
  std::string_view version_salt = "";
};

/// A configured judge's version (core/judge_version.hpp): its fields are its type, kind, the
/// descriptor's version_salt (`template`) and its scoring options (OptionSpec::scoring) as
/// configured, in the descriptor's order, each with a canonical value (strings quoted, numbers
/// in the shortest round-trip form, lists joined by U+001F, trees in file order); an LLM
/// judge's `endpoint` counts by its host only. Two configurations with the same version score
/// the same; a rubric edit, another model, provider or host, or a new prompt template starts a
/// new version. Never throws.
JudgeVersion judgeVersionOf(const JudgeDescriptor& descriptor, const JudgeOptionValues& values);
/// judgeVersionOf(…).id: 12 lower-case hex digits.
std::string judgeVersion(const JudgeDescriptor& descriptor, const JudgeOptionValues& values);

/// What one configured judge measures and on which scale. For most types it is the
/// descriptor's; a type whose options choose the criterion (an LLM judge: the rubric) says so.
struct JudgeInfo {
  std::string criterion;
  double min_score = 0, max_score = 1;
  std::vector<double> buckets;  ///< histogram upper bounds, ascending, the last = max_score
  /// false for pass/fail checks: a check that almost always passes is healthy, not lenient.
  bool graded = true;
  /// JSON Pointers into the event message whose values the judge reads (Event::fields): a
  /// custom LLM rubric's `rubric.inputs`. The event parser extracts their union.
  std::vector<std::string> event_fields{};
};

/// The descriptor's criterion and scale (for types whose options do not change them).
JudgeInfo descriptorInfo(const JudgeDescriptor& d);

/// `assay_judge_score` buckets shared by the judges of the same scale: deciles of [0, 1], and
/// pass/fail (0 or 1).
inline const std::vector<double> kUnitIntervalBuckets = {0.1, 0.2, 0.3, 0.4, 0.5,
                                                         0.6, 0.7, 0.8, 0.9, 1.0};
inline const std::vector<double> kPassFailBuckets = {0.0, 1.0};

/// A nested option value as written in the configuration: a scalar (its text), a mapping (keys
/// in file order) or a list. The judge that takes it converts and checks the scalars.
struct OptionTreeEntry;
struct OptionTree {
  enum class Kind { kScalar, kMap, kList };
  Kind kind = Kind::kScalar;
  std::string scalar;
  std::vector<OptionTreeEntry> map;  ///< key → value, in file order
  std::vector<OptionTree> list;
  /// The mapping's value for `key`, or nullptr (also when this is not a mapping).
  const OptionTree* find(std::string_view key) const;
};
struct OptionTreeEntry {
  std::string key;
  OptionTree value;
};

using OptionValue =
    std::variant<std::int64_t, double, bool, std::string, std::vector<std::string>, OptionTree>;

/// A configuration error in judge options, thrown by factories (control plane only).
/// `key` is the option's path ("" for the judge as a whole): a name ("max_order"), or inside a
/// tree option dotted names and [index] ("rubric.examples[1].score"); config/ maps it to
/// FILE:LINE:COLUMN. A factory that checks every option at once lists the further errors in
/// `others` (key, message), so that --check-config prints them all.
struct OptionError : std::runtime_error {
  OptionError(std::string key, const std::string& message)
      : std::runtime_error(message), key(std::move(key)) {}
  std::string key;
  std::vector<std::pair<std::string, std::string>> others;
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
  const OptionTree* getTree(std::string_view name) const;               ///< nullptr when absent
  /// getInt / getNumber within [lo, hi]; OptionError "must be between lo and hi" otherwise.
  std::int64_t getIntIn(std::string_view name, std::int64_t dflt, std::int64_t lo,
                        std::int64_t hi) const;
  double getNumberIn(std::string_view name, double dflt, double lo, double hi) const;
  /// The value as configured, or nullptr when absent.
  const OptionValue* find(std::string_view name) const {
    const auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }

  /// A file_digest option's file (OptionSpec::file_digest), read once: its bytes, or why it
  /// could not be read (readRegularFile's reason, no path).
  struct FileRead {
    std::string bytes;
    std::string error;
  };
  /// Reads every file_digest option of `options` that is set to a path, at most
  /// kMaxOptionFileBytes each (a bigger file is an error here). The version and the judge then
  /// use these bytes, so a file replaced between the two reads cannot give a version that does
  /// not match the judge's scores. Copies share the bytes.
  void readFiles(std::span<const OptionSpec> options);
  /// The bytes readFiles read for option `name`, or nullptr when it did not read one (the
  /// reader then reads the path itself).
  const FileRead* file(std::string_view name) const {
    const auto it = files_.find(name);
    return it == files_.end() ? nullptr : it->second.get();
  }
  static constexpr std::size_t kMaxOptionFileBytes = std::size_t{16} << 20;

 private:
  std::map<std::string, OptionValue, std::less<>> values_;
  std::map<std::string, std::shared_ptr<const FileRead>, std::less<>> files_;
};

/// What a factory may use besides the judge's own options.
struct JudgeContext {
  std::string name;  ///< the configured judge name (budget scope "judge:<name>", log lines)
  /// Its version id (judgeVersionOf), the judge_version label of its own series; "" for none.
  std::string version{};
  const BudgetOptions* budget = nullptr;  ///< prices, caps, time zone, ledger store (never null)
  std::size_t max_waiting = 10000;  ///< calls a judge may queue locally (limits.queue_capacity)
  /// limits.when_full is block: nothing may be dropped, so an LLM judge's open circuit breaker
  /// holds its calls (up to its breaker_max_hold_ms) instead of ending them as provider_error.
  bool hold_when_open = true;
  /// Shared resources of asynchronous judges (HTTP clients, budget ledger). nullptr while the
  /// configuration is only being checked: a factory that needs them checks its options and
  /// returns nullptr.
  JudgeServices* services = nullptr;
  /// Reports a warning about an option (key as in OptionError), e.g. an API key variable unset
  /// in this environment. May be empty.
  std::function<void(const std::string& key, const std::string& message)> warn;
};

/// Receives an asynchronous verdict; called exactly once.
using VerdictCallback = std::function<void(Verdict verdict)>;

/// A configured judge type. Implementations are immutable after construction (an asynchronous
/// judge's calls in flight are not part of its configuration) and every method is safe to call
/// from several threads at once. Neither method throws on any event content: an event the
/// judge cannot judge yields a non-ok `Outcome`, never a stand-in score.
class Judge {
 public:
  virtual ~Judge() = default;
  /// Judges one event on the caller's thread. An asynchronous judge blocks until its verdict
  /// (for tools and tests; the daemon calls judgeAsync).
  virtual Verdict judge(const Event& event) const = 0;
  /// Starts judging `event` (the judge copies what it keeps); `done` runs exactly once, on the
  /// caller's thread for a synchronous judge or an outcome decided at once, else later on a
  /// thread of the judge's services.
  // By value: an asynchronous judge keeps `done` until its verdict arrives.
  virtual void judgeAsync(
      const Event& event,
      VerdictCallback done) const {  // NOLINT(performance-unnecessary-value-param)
    done(judge(event));
  }
  /// The longest an asynchronous judge may go without delivering any verdict while runs of it
  /// are outstanding, when it works: past it the daemon reports the judge stalled (a wedged
  /// judge, issue 28: /healthz, assay_judge_stalled, the AssayJudgeStalled alert). nullopt:
  /// never reported (a synchronous judge, whose runs end on the worker's thread).
  virtual std::optional<std::chrono::seconds> maxSilence() const { return std::nullopt; }
};

}  // namespace assay
