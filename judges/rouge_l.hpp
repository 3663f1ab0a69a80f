#pragma once
/// ROUGE-L: longest common subsequence of word tokens between the answer (candidate) and the
/// event's `reference`. Source: Lin, "ROUGE: A Package for Automatic Evaluation of Summaries",
/// ACL 2004 workshop, §3.1 (sentence-level LCS, F-measure with beta = 1, i.e. the harmonic mean
/// of P = LCS/|candidate| and R = LCS/|reference|). Tokens come from the shared tokenizer
/// (judges/tokenizer.hpp; the judge reads them with `cachedWords`, citation markers skipped).
/// Threads: the functions keep thread_local scratch; any number of threads may call them.

#include <string>
#include <vector>

#include "judges/judge.hpp"
#include "judges/tokenizer.hpp"

namespace assay {

struct RougeScore {
  std::size_t lcs = 0;                      ///< LCS length, in tokens
  double precision = 0, recall = 0, f = 0;  ///< all in [0, 1]; 0 when either side is empty
};

/// The largest |answer tokens| × |reference tokens| the ROUGE-L judge computes: the LCS takes
/// O(|a|·|b| / 64) time (bit-parallel) and O(min(|a|,|b|)² / 64) 64-bit words of memory (4,000 ×
/// 4,000 tokens: 2 MB, a few ms). Above it the verdict is `too_long`.
inline constexpr std::size_t kMaxLcsCells = 16'000'000;

/// Length of the longest common subsequence of two token lists. Bit-parallel (Allison & Dix
/// 1986; Hyyrö 2004): O(|a|·|b| / 64) time, a bit mask of the shorter side per distinct token.
/// In tokens; 0 when either side is empty.
std::size_t lcsLength(const Words& a, const Words& b);
std::size_t lcsLength(const std::vector<std::string>& a, const std::vector<std::string>& b);
RougeScore rougeL(const Words& candidate, const Words& reference);
RougeScore rougeL(const std::vector<std::string>& candidate,
                  const std::vector<std::string>& reference);

struct RougeLJudgeOptions {};  ///< rouge_l takes no option

/// Score = ROUGE-L F in [0, 1]; outcome `no_reference` when the event has no reference or its
/// reference has no token (only markers or punctuation: evidence "reference has no tokens"),
/// `too_long` when answer × reference tokens exceed kMaxLcsCells.
/// Citation markers ("[1]") are removed from both sides first (`stripCitationMarkers`).
/// An empty answer scores 0 (a real, bad answer), not an outcome.
class RougeLJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

}  // namespace assay
