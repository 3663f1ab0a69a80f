#pragma once
/// Turns one Kafka message value into an `Event`, reading fields at the configured JSON
/// Pointers (RFC 6901). Checks, in this order: size (`too_large`), UTF-8 validity of the whole
/// payload (`not_utf8`), nesting depth (`too_deep`), NUL bytes and escapes of half a surrogate
/// pair (`not_json`: core/json_limits.hpp), JSON syntax and a top-level object (`not_json`),
/// required fields `question`/`answer` (`missing_field`, also when null), field types
/// (`wrong_type`), and a message key used as the id that is not UTF-8 (`not_utf8`). Never throws on
/// message content.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/options.hpp"
#include "core/event.hpp"

namespace assay {

/// Why a Kafka message is not an event (`assay_events_invalid_total{reason}`).
enum class InvalidReason {
  kNotJson = 0,
  kNotUtf8,
  kMissingField,
  kWrongType,
  kTooLarge,
  kTooDeep,  ///< arrays/objects nested deeper than kMaxJsonDepth (core/json_limits.hpp)
  kCount_
};
inline constexpr int kInvalidReasonCount = static_cast<int>(InvalidReason::kCount_);
/// The reason's label value: not_json, not_utf8, missing_field, wrong_type, too_large, too_deep.
std::string_view invalidReasonName(InvalidReason r);

struct ParseOutcome {
  bool ok = false;
  InvalidReason reason = InvalidReason::kNotJson;  ///< when !ok
  std::string detail;  ///< when !ok: which field or where, for the log (never a metric label)
};

class EventParser {
 public:
  EventParser(const EventFieldOptions& fields, std::size_t max_event_bytes);
  ~EventParser();

  /// `fallback_id` is used when the event has no id field (the Kafka key, else
  /// "topic/partition/offset"). On success fills `out`.
  ParseOutcome parse(std::string_view payload, std::string_view fallback_id, Event& out) const;

  /// Replaces the extra JSON Pointers whose values go to Event::fields (the judges' rubric
  /// inputs, after a reload rebuilt the judges). Not thread-safe: the thread that parses.
  void setExtra(const std::vector<std::string>& pointers);

  /// Reads only the id (for --replay keys): empty when the line is not JSON or has none.
  std::string extractId(std::string_view payload) const;

  /// Which library parses. kSimdjson (the default): simdjson's DOM parser (SIMD UTF-8 and
  /// structure validation, a parser per thread, no allocation per message beyond the event's
  /// strings) reads every message of at most kFastPathMaxBytes with no NUL byte; any message it
  /// refuses, or whose fields are not all as expected, is parsed again the thorough way, which
  /// gives the reason and detail. kRapidJson: the thorough way only (jsonShapeProblem, then
  /// RapidJSON): the same outcome and event for every input, 3 to 4 times slower on valid events
  /// (docs/BENCHMARKS.md). For tests and benchmarks.
  enum class JsonEngine { kSimdjson, kRapidJson };
  void setEngine(JsonEngine engine) { engine_ = engine; }
  /// Larger messages go the thorough way (the per-thread simdjson parser stays this small).
  static constexpr std::size_t kFastPathMaxBytes = std::size_t{64} * 1024;

 private:
  bool parseFast(std::string_view payload, std::string_view fallback_id, Event& out) const;
  ParseOutcome parseThorough(std::string_view payload, std::string_view fallback_id,
                             Event& out) const;

  struct Pointers;
  std::unique_ptr<Pointers> p_;
  std::size_t max_event_bytes_;
  JsonEngine engine_ = JsonEngine::kSimdjson;
};

}  // namespace assay
