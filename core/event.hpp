#pragma once
/// The RAG event as the judges see it: one request/response of the monitored service,
/// already parsed and validated (sources/event_parser.hpp). Field meanings are those of
/// docs/events.md. Strings are UTF-8 (validated at parse time).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace assay {

/// One retrieved chunk, in the rank order the retriever returned it (index 0 = rank 1).
struct Context {
  std::string id;      ///< chunk id; empty when the event gave contexts as plain strings
  std::string text;    ///< chunk text
  std::string source;  ///< URL or document name; may be empty
};

/// Expected answer format (docs/events.md, `expected_format`).
enum class AnswerFormat { kText, kJson };

struct Event {
  std::string id;                           ///< request id (the sampling hash key)
  std::string tenant, app, variant, model;  ///< empty when absent
  std::string question;
  std::vector<Context> contexts;  ///< empty = retrieval returned nothing
  std::string answer;
  std::optional<std::string> reference;                          ///< ground-truth answer
  std::optional<std::vector<std::string>> relevant_context_ids;  ///< retrieval ground truth
  AnswerFormat expected_format = AnswerFormat::kText;
  /// Values at the extra JSON Pointers that custom LLM rubrics read (`rubric.inputs`,
  /// EventFieldOptions::extra): pointer → text (a JSON string's value; any other non-null value
  /// as compact JSON). Only the pointers with a value, in the order of `extra`.
  std::vector<std::pair<std::string, std::string>> fields;

  /// The value at `pointer` in `fields`, or nullptr.
  const std::string* field(const std::string& pointer) const {
    for (const auto& [p, v] : fields)
      if (p == pointer) return &v;
    return nullptr;
  }
};

}  // namespace assay
