#pragma once
/// Deterministic checks: pass/fail verdicts (score 1 = passed, 0 = failed, `passed` set),
/// except `refusal`, which is a label (score 1 = the answer declines), not a quality score.
/// All run in microseconds.

#include <memory>
#include <string>
#include <vector>

#include "judges/judge.hpp"

namespace re2 {
class RE2;
}

namespace assay {

/// User-supplied patterns, compiled with RE2 (linear time in the text, bounded memory: no
/// pattern can make a judge hang or overflow its stack on a hostile answer).
using Patterns = std::vector<std::shared_ptr<const re2::RE2>>;

/// Passes when the answer has at least one non-white-space character.
class AnswerNonemptyJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

struct CitesSourceOptions {
  std::vector<std::string> patterns;  ///< extra RE2 regexes; a match counts as a citation
};

/// Passes when the answer references at least one retrieved context: a bracketed marker
/// `[n]` with 1 ≤ n ≤ number of contexts (also `[1, 3]`, `[1][2]`), a bracketed context id
/// `[doc-7]`, a context's `source` URL written out, or a match of a configured pattern.
/// Outcome `no_context` when the event has no contexts (nothing could be cited).
class CitesSourceJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit CitesSourceJudge(const CitesSourceOptions& o);
  Verdict judge(const Event& event) const override;

 private:
  Patterns patterns_;
};

struct ContextCountOptions {
  int min = 1;  ///< fewest contexts, ≥ 0
  int max = 0;  ///< most contexts; 0 = no upper bound
};

/// Passes when min ≤ number of contexts ≤ max. Empty contexts fail with the default min 1.
class ContextCountJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit ContextCountJudge(ContextCountOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  ContextCountOptions options_;
};

struct AnswerLengthOptions {
  long min_chars = 1;  ///< in Unicode code points
  long max_chars = 0;  ///< 0 = no upper bound
};

/// Passes when min_chars ≤ answer length in code points ≤ max_chars.
class AnswerLengthJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit AnswerLengthJudge(AnswerLengthOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  AnswerLengthOptions options_;
};

/// Label: score 1 when the answer declines or says it does not know (built-in English and
/// French phrases, plus configured `patterns`), else 0. A refusal can be the right answer when
/// the contexts lack the information, so this is a rate to watch, not a pass/fail.
class RefusalJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit RefusalJudge(const std::vector<std::string>& patterns);
  Verdict judge(const Event& event) const override;

  /// The matched phrase, or empty when `answer` is not a refusal.
  std::string matchedPhrase(std::string_view answer) const;

 private:
  Patterns patterns_;
};

/// Compiles case-insensitive RE2 regexes (syntax: github.com/google/re2/wiki/Syntax, UTF-8);
/// throws OptionError(key) naming the bad one and RE2's reason.
Patterns compilePatterns(const std::vector<std::string>& patterns, const std::string& key);

}  // namespace assay
