#pragma once
/// Bounds on JSON that assay reads from outside (events, feedback, LLM replies, answers checked
/// by json_valid, judgments files), checked in one linear pass before RapidJSON sees the text:
///   - nesting deeper than kMaxJsonDepth arrays and objects: RapidJSON's recursive descent (and
///     the schema validator after it) would overflow the stack on a few hundred kilobytes of
///     `[[[[…`, a crash that repeats on every redelivery of the message;
///   - a NUL byte anywhere: RapidJSON treats it as the end of the text, so a message would be
///     judged on its first part only. A message is valid JSON in its whole length or invalid;
///   - bytes that are not well-formed UTF-8 (utf8.hpp), and a `\uDC00`-style escape that is not
///     the second half of a surrogate pair (or a `\uD800`-style one not followed by its second
///     half): RapidJSON 1.1 decodes a lone low surrogate into bytes that are not UTF-8, and the
///     string would leave assay invalid (promtool refuses the whole /metrics page for one label).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/utf8.hpp"

namespace assay {

/// Arrays and objects nested deeper than this are refused (events are 3 or 4 levels deep).
inline constexpr int kMaxJsonDepth = 128;

struct JsonShapeProblem {
  enum class Kind { kTooDeep, kNulByte, kNotUtf8, kLoneSurrogate } kind;
  std::size_t offset;  ///< byte where the limit was crossed
  std::string message() const {
    std::string at = "at byte " + std::to_string(offset);
    switch (kind) {
      case Kind::kTooDeep:
        return "nested deeper than " + std::to_string(kMaxJsonDepth) + " arrays/objects (" + at +
               ")";
      case Kind::kNulByte:
        return "a NUL byte " + at;
      case Kind::kNotUtf8:
        return "invalid UTF-8 sequence " + at;
      case Kind::kLoneSurrogate:
        return "a \\u escape of half a surrogate pair " + at + " (not a character)";
    }
    return at;
  }
};

namespace json_limits_detail {
/// The value of the 4 hex digits at text[at..at+3], or -1.
inline long hex4(std::string_view text, std::size_t at) {
  if (at + 4 > text.size()) return -1;
  long v = 0;
  for (std::size_t k = at; k < at + 4; ++k) {
    const char c = text[k];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}
/// The bytes from `i` on that end no string's run: the first quote, backslash or NUL at or
/// after `i`, found eight bytes at a time ("Bit Twiddling Hacks", haszero(x ^ c): exact for
/// "any"); text.size() when there is none.
inline std::size_t stringRunEnd(std::string_view text, std::size_t i) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const auto zero = [](std::uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, text.data() + i, 8);
    if ((zero(w) | zero(w ^ (0x22 * kOnes)) | zero(w ^ (0x5C * kOnes))) != 0) break;
  }
  while (i < text.size() && text[i] != '"' && text[i] != '\\' && text[i] != '\0') ++i;
  return i;
}
}  // namespace json_limits_detail

/// The first problem of `text`, or nullopt: invalid UTF-8 first (anywhere in the text), then the
/// first of depth, NUL byte and half a surrogate pair. Brackets inside strings (escapes included)
/// do not count. Linear in the text, no allocation; the text need not be valid JSON otherwise.
inline std::optional<JsonShapeProblem> jsonShapeProblem(std::string_view text) {
  using json_limits_detail::hex4;
  if (const auto bad = firstInvalidUtf8(text); bad < text.size())
    return JsonShapeProblem{JsonShapeProblem::Kind::kNotUtf8, bad};
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    // Inside a string, only a quote, a backslash or a NUL byte can matter: skipped to.
    if (in_string && !escaped && (i = json_limits_detail::stringRunEnd(text, i)) == text.size())
      break;
    const char c = text[i];
    if (c == '\0') return JsonShapeProblem{JsonShapeProblem::Kind::kNulByte, i};
    if (in_string) {
      if (escaped) {
        escaped = false;
        const long u = c == 'u' ? hex4(text, i + 1) : -1;
        if (u >= 0xDC00 && u <= 0xDFFF)  // a second half with no first half before it
          return JsonShapeProblem{JsonShapeProblem::Kind::kLoneSurrogate, i - 1};
        if (u >= 0xD800 && u <= 0xDBFF) {  // a first half: its second half must follow
          const bool next = i + 6 < text.size() && text[i + 5] == '\\' && text[i + 6] == 'u';
          const long low = next ? hex4(text, i + 7) : -1;
          if (low < 0xDC00 || low > 0xDFFF)
            return JsonShapeProblem{JsonShapeProblem::Kind::kLoneSurrogate, i - 1};
          i += 10;  // past both escapes' digits
        }
      } else if (c == '\\')
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
