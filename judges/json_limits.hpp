#pragma once
/// Bounds on JSON that assay reads from outside (events, feedback, LLM replies, answers checked
/// by json_valid, judgments files), checked in one linear pass before RapidJSON sees the text:
///   - nesting deeper than kMaxJsonDepth arrays and objects: RapidJSON's recursive descent (and
///     the schema validator after it) would overflow the stack on a few hundred kilobytes of
///     `[[[[…`, a crash that repeats on every redelivery of the message;
///   - a NUL byte anywhere: RapidJSON treats it as the end of the text, so a message would be
///     judged on its first part only. A message is valid JSON in its whole length or invalid.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace assay {

/// Arrays and objects nested deeper than this are refused (events are 3 or 4 levels deep).
inline constexpr int kMaxJsonDepth = 128;

struct JsonShapeProblem {
  enum class Kind { kTooDeep, kNulByte } kind;
  std::size_t offset;  ///< byte where the limit was crossed
  std::string message() const {
    return kind == Kind::kTooDeep ? "nested deeper than " + std::to_string(kMaxJsonDepth) +
                                        " arrays/objects (at byte " + std::to_string(offset) + ")"
                                  : "a NUL byte at byte " + std::to_string(offset);
  }
};

/// The first problem of `text`, or nullopt. Brackets inside strings (escapes included) do not
/// count. Linear in the text, no allocation; the text need not be valid JSON otherwise.
inline std::optional<JsonShapeProblem> jsonShapeProblem(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') return JsonShapeProblem{JsonShapeProblem::Kind::kNulByte, i};
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return JsonShapeProblem{JsonShapeProblem::Kind::kTooDeep, i};
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace assay
