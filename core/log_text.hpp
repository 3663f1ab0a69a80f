#pragma once
/// Text from outside (a Kafka key, an event field, an exception's message) on its way into a
/// log line: control characters (newlines, ANSI escapes) and backslashes become `\xNN` / `\\`,
/// so that an event cannot forge a log line or repaint a terminal, and the text is cut at
/// `max_bytes` (at a UTF-8 boundary, "…" appended). Bytes that are not well-formed UTF-8
/// (utf8.hpp) become `\xNN` too, so a log line is always valid UTF-8 (journald and log
/// shippers drop or mangle lines that are not). Valid UTF-8 passes through otherwise.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/utf8.hpp"

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

/// `url` fit to print in a log line, a judgment or /readyz: credentials in it are masked.
/// "user:password@" before the host becomes "***@"; a port that is not a number becomes "***"
/// (a key pasted where the port goes); every query parameter's value becomes "***" (an
/// endpoint may carry ?api-key=, Azure OpenAI's style), and so does a parameter without a value
/// of 16 characters or more (a key pasted after '?'), and a fragment ("#***"). The rest passes
/// through logText().
/// Example: "https://u:p@h/v1?api-key=k&x=1" -> "https://***@h/v1?api-key=***&x=***".
inline std::string safeUrl(std::string_view url, std::size_t max_bytes = 200) {
  std::string out;
  const std::size_t scheme = url.find("://");
  const std::size_t authority = scheme == std::string_view::npos ? 0 : scheme + 3;
  // Userinfo ends at the last '@' before the path, even when a password holds '?' or '#'
  // unescaped ("https://u:ab?cd@h").
  const std::size_t slash = url.find('/', authority);
  const std::size_t at =
      url.substr(authority,
                 slash == std::string_view::npos ? std::string_view::npos : slash - authority)
          .rfind('@');
  const std::size_t host_start = at == std::string_view::npos ? authority : authority + at + 1;
  const std::size_t path = url.find_first_of("/?#", host_start);
  const std::string_view host = url.substr(
      host_start, path == std::string_view::npos ? std::string_view::npos : path - host_start);
  out.append(url.substr(0, authority));
  std::string_view shown = host;
  if (at != std::string_view::npos) out += "***@";
  const std::size_t colon = shown.rfind(':');
  const std::size_t bracket = shown.rfind(']');  // [::1]:8080
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket) &&
      (shown.front() == '[' || shown.find(':') == colon)) {
    const std::string_view port = shown.substr(colon + 1);
    out.append(shown.substr(0, colon + 1));
    if (std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      out.append(port);
    else
      out += "***";
  } else {
    out.append(shown);
  }
  if (path == std::string_view::npos) return logText(out, max_bytes);
  std::string_view rest = url.substr(path);
  const std::size_t hash = rest.find('#');  // a fragment may carry a key: never shown
  const bool fragment = hash != std::string_view::npos;
  rest = rest.substr(0, hash);
  const std::size_t q = rest.find('?');
  out.append(rest.substr(0, q));
  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    out += '?';
    for (bool first = true; !query.empty(); first = false) {
      const std::size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      if (!first) out += '&';
      if (param.find('=') != std::string_view::npos)
        out.append(param.substr(0, param.find('='))).append("=***");
      else
        out.append(param.size() >= 16 ? std::string_view("***") : param);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
  }
  if (fragment) out += "#***";
  return logText(out, max_bytes);
}

}  // namespace assay
