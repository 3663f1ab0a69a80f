#include "core/yaml_reader.hpp"

#include <sstream>

namespace assay {

namespace {

/// `text` with its control characters (newline, ESC, NUL…) as \xNN: a key or value from the
/// file quoted in a message must not split the line or repaint the terminal (the hostile
/// trial). Backslashes and other bytes are left as they are (a regex quoted stays readable).
std::string controlsEscaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string ConfigError::format() const {
  std::ostringstream s;
  s << controlsEscaped(file);
  if (line > 0) s << ':' << line << ':' << column;
  s << ": ";
  if (!path.empty()) s << controlsEscaped(path) << ": ";
  s << controlsEscaped(message);
  return s.str();
}

}  // namespace assay
