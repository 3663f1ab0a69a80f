#pragma once
/// Text from outside (a Kafka key, an event field, an exception's message) on its way into a
/// log line: control characters (newlines, ANSI escapes) and backslashes become `\xNN` / `\\`,
/// so that an event cannot forge a log line or repaint a terminal, and the text is cut at
/// `max_bytes` (at a UTF-8 boundary, "…" appended). Bytes that are not well-formed UTF-8
/// (utf8.hpp) become `\xNN` too, so a log line is always valid UTF-8 (journald and log
/// shippers drop or mangle lines that are not). Valid UTF-8 passes through otherwise.

#include <cstddef>
#include <string>
#include <string_view>

#include "judges/utf8.hpp"

namespace assay {

inline std::string logText(std::string_view text, std::size_t max_bytes = 200) {
  bool cut = false;
  if (text.size() > max_bytes) {
    std::size_t n = max_bytes;
    // Back to the start of the sequence the cut falls in (at most 3 bytes: stray continuation
    // bytes are escaped one by one below).
    for (int k = 0; k < 3 && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80; ++k)
      --n;
    text = text.substr(0, n);
    cut = true;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 8);
  const auto escape = [&out](unsigned char u) {
    out += "\\x";
    out += kHex[u >> 4];
    out += kHex[u & 0xF];
  };
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const std::size_t n = utf8SequenceLength(text, i);
      if (n == 0) {
        escape(u);
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\\')
      out += "\\\\";
    else if (u < 0x20 || u == 0x7F)
      escape(u);
    else
      out += c;
    ++i;
  }
  if (cut) out += "…";
  return out;
}

}  // namespace assay
