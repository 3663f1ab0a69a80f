#pragma once
/// One judged event as written by every sink (docs/events.md, "Output"): the one writer
/// (toJson) and the one reader (readJudgmentLine) of a judgment line, which assay report,
/// assay calibrate --judgments and the tracker's baseline file all read through.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/judge_version.hpp"
#include "core/verdict.hpp"

namespace assay {

struct JudgedVerdict {
  std::string judge;      ///< configured judge name
  std::string criterion;  ///< from the judge's descriptor
  Verdict verdict;
  double min_score = 0, max_score = 1;
  double latency_ms = 0;  ///< wall time of this judge on this event, milliseconds
  /// The judge's version when it judged (`judge_version`, `judge_version_fields`); null: none
  /// written (a judge built without one, in tests).
  std::shared_ptr<const JudgeVersion> version{};
};

struct Judgment {
  std::string id, tenant, app, variant;
  std::int64_t judged_at_ms = 0;  ///< Unix epoch milliseconds (UTC)
  std::vector<JudgedVerdict> verdicts;
  bool backfill = false;  ///< judged by `assay backfill` (written as "backfill": true)
};

/// Compact one-line JSON object, keys in the order of docs/events.md: `judged_at` as RFC 3339 UTC
/// with milliseconds; `score` null and `error` = outcome name when the judge could not judge;
/// optional keys (`judge_version`, `judge_version_fields`, `passed`, `evidence`) only when set.
/// No trailing newline.
std::string toJson(const Judgment& j);

/// One verdict of a judgment line as read back.
inline constexpr std::size_t kMaxVersionFields = 100;

struct VerdictRecord {
  std::string judge;                      ///< configured judge name (always a string)
  std::string criterion;                  ///< "" when absent or not a string
  std::optional<double> min, max, score;  ///< when present and numbers
  std::string outcome = "ok";             ///< the `error` member when a string, else "ok"
  bool has_passed = false;                ///< a `passed` member is present (a check)
  std::string version;                    ///< `judge_version` when a string, else ""
  /// `judge_version_fields`: its members whose values are strings, in order (name → digest), the
  /// first kMaxVersionFields of them (a judge has a few dozen options at most).
  std::vector<std::pair<std::string, std::string>> version_fields;
};

/// A judgment line as read back: every member optional, as a hand-written or older line may
/// lack one; each reader says which it needs.
struct JudgmentRecord {
  std::optional<std::string> id;         ///< `id` when a string
  std::optional<std::string> judged_at;  ///< `judged_at` when a string (RFC 3339, unchecked)
  bool verdicts_array = false;           ///< `verdicts` is an array
  /// Its members that are objects with a string `judge`, in order (others are skipped).
  std::vector<VerdictRecord> verdicts;
};

/// Why a line is not a judgment object.
struct JudgmentLineProblem {
  enum class Kind {
    kShape,     ///< the JSON bounds of core/json_limits.hpp (UTF-8, depth, NUL, surrogates)
    kNotJson,   ///< a syntax error
    kNotObject  ///< JSON, but not an object
  };
  Kind kind;
  std::string message;  ///< e.g. "nested deeper than 64 levels at byte 80"
};

/// Reads one line of a judgments file (JSON Lines); nullopt when it is a JSON object, whose
/// members are then in `out`. Never throws on the line's content.
std::optional<JudgmentLineProblem> readJudgmentLine(std::string_view line, JudgmentRecord& out);

/// RFC 3339 UTC timestamp with milliseconds, e.g. "2026-11-29T13:42:05.120Z".
std::string formatRfc3339(std::int64_t epoch_ms);

}  // namespace assay
