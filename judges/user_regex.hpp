#pragma once
/// Bounds on a regular expression an operator supplies (cites_source and refusal `patterns`,
/// `redact.patterns`). RE2 runs in time linear in the text, but its constant is the compiled
/// program's size when its DFA cache runs out: a 550-byte pattern of counted repetitions cost
/// 10 s per 200 KB event. A pattern is refused at load when its program is larger than
/// kMaxRegexProgram instructions (the shipped patterns are under 400; `\pL{100}` is 119,405),
/// and its DFA gets kRegexMemory bytes (RE2's max_mem). A list holds at most kMaxUserPatterns
/// (each pattern scans the whole text: 32 × 1,000 instructions bound the work per byte).

#include <re2/re2.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace assay {

inline constexpr int kMaxRegexProgram = 1000;
inline constexpr std::size_t kMaxUserPatterns = 32;
inline constexpr std::int64_t kRegexMemory = std::int64_t{8} << 20;

/// RE2 options for a user's pattern: errors not logged by RE2 (the loader reports them), the
/// DFA memory bound above.
inline re2::RE2::Options userRegexOptions() {
  re2::RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(kRegexMemory);
  return o;
}

/// Why `re` may not run on events ("" when it may): invalid, or its program (forward or
/// reverse) over kMaxRegexProgram instructions.
inline std::string userRegexProblem(const re2::RE2& re) {
  if (!re.ok()) return "invalid RE2 regex: " + re.error();
  const int size = std::max(re.ProgramSize(), re.ReverseProgramSize());
  if (size > kMaxRegexProgram)
    return "compiles to " + std::to_string(size) + " RE2 instructions, over the " +
           std::to_string(kMaxRegexProgram) +
           " allowed (a counted repetition such as {100} or \\pL repeated is the usual cause)";
  return "";
}

/// Why a list of `count` patterns may not run ("" when it may): more than kMaxUserPatterns.
inline std::string userPatternCountProblem(std::size_t count) {
  if (count <= kMaxUserPatterns) return "";
  return std::to_string(count) + " patterns, at most " + std::to_string(kMaxUserPatterns) +
         " (each one scans the whole text: join alternatives into one pattern with |)";
}

}  // namespace assay
