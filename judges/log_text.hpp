#pragma once
/// Text from outside (a Kafka key, an event field, an exception's message) on its way into a
/// log line: control characters (newlines, ANSI escapes) and backslashes become `\xNN` / `\\`,
/// so that an event cannot forge a log line or repaint a terminal, and the text is cut at
/// `max_bytes` (at a UTF-8 boundary, "…" appended). Valid UTF-8 passes through otherwise.

#include <cstddef>
#include <string>
#include <string_view>

namespace assay {

inline std::string logText(std::string_view text, std::size_t max_bytes = 200) {
  bool cut = false;
  if (text.size() > max_bytes) {
    std::size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    text = text.substr(0, n);
    cut = true;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7F) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  if (cut) out += "…";
  return out;
}

}  // namespace assay
