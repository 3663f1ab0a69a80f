#pragma once
/// UTF-8 well-formedness, the one definition every entry point uses (docs/events.md, "Invalid
/// events"): a string that enters assay (an event, a Kafka key, feedback, an OTLP attribute, a
/// configuration file, an HTTP query, a provider's reply) is well-formed UTF-8 or refused there,
/// so every exit (/metrics, JSON Lines, the results topic, logs, HTTP answers) is valid UTF-8.
///
/// Well-formed means the Unicode Standard's definition (Unicode 15.0, section 3.9, table 3-7):
/// shortest forms only (no overlong C0/C1/E0 80–9F/F0 80–8F), no surrogates (ED A0–BF), nothing
/// above U+10FFFF (F4 90+, F5–FF), no stray continuation byte, no truncated sequence.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace assay {

/// Bytes in the well-formed UTF-8 sequence that starts at `text[at]` (1 to 4), or 0 when the
/// bytes there are not one (see the file comment). `at` < text.size().
inline std::size_t utf8SequenceLength(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return k < text.size() && byte(k) >= lo && byte(k) <= hi;
  };
  const unsigned c = byte(at);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(at + 1) ? 2 : 0;
  if (c == 0xE0) return cont(at + 1, 0xA0) && cont(at + 2) ? 3 : 0;
  if (c == 0xED) return cont(at + 1, 0x80, 0x9F) && cont(at + 2) ? 3 : 0;
  if (c >= 0xE1 && c <= 0xEF) return cont(at + 1) && cont(at + 2) ? 3 : 0;
  if (c == 0xF0) return cont(at + 1, 0x90) && cont(at + 2) && cont(at + 3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(at + 1) && cont(at + 2) && cont(at + 3) ? 4 : 0;
  if (c == 0xF4) return cont(at + 1, 0x80, 0x8F) && cont(at + 2) && cont(at + 3) ? 4 : 0;
  return 0;
}

/// Byte offset of the first ill-formed sequence in `text`, or text.size() when it is all
/// well-formed UTF-8. Linear, no allocation.
inline std::size_t firstInvalidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (i + 8 <= text.size()) {  // ASCII runs eight bytes at a time (no byte with its top bit)
      std::uint64_t w = 0;
      std::memcpy(&w, text.data() + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8SequenceLength(text, i);
    if (n == 0) return i;
    i += n;
  }
  return i;
}

inline bool isValidUtf8(std::string_view text) { return firstInvalidUtf8(text) == text.size(); }

/// `text` as valid UTF-8 of at most `max_bytes` (plus "…", 3 bytes, when it was cut): each byte
/// that does not start a well-formed sequence becomes U+FFFD, and the cut falls between
/// characters. For text quoted from outside that no parser has checked (a provider's reply
/// read as plain text).
inline std::string utf8Clean(std::string_view text, std::size_t max_bytes = std::string::npos) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8SequenceLength(text, i);
    const std::string_view piece = n ? text.substr(i, n) : std::string_view("\xEF\xBF\xBD");
    if (out.size() + piece.size() > max_bytes) return out + "\xE2\x80\xA6";
    out.append(piece);
    i += n ? n : 1;
  }
  return out;
}

}  // namespace assay
