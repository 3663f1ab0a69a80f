#pragma once
/// Small text helpers shared by the `assay` subcommands (estimate, calibrate).

#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace assay::cli {

/// The whole of `s` as a finite decimal number; nullopt otherwise (empty, trailing text, nan).
inline std::optional<double> parseDouble(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

/// Splits at every `sep` ("a,,b" → "a", "", "b"; "" → one empty part).
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(sep, start);
    parts.emplace_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

/// True when the arguments ask for help (-h, --help).
inline bool wantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

}  // namespace assay::cli
