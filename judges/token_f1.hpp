#pragma once
/// Token F1 as in the SQuAD evaluation script (Rajpurkar et al., EMNLP 2016; official
/// `evaluate-v2.0.py`): normalise (lower-case, strip punctuation, drop the articles a/an/the,
/// collapse whitespace), then F1 of the multiset overlap of tokens. Tokens come from
/// `tokenize()`, so CJK text is compared per character.

#include <string>
#include <vector>

#include "judges/judge.hpp"
#include "judges/tokenizer.hpp"

namespace assay {

/// Multiset-overlap F1 in [0, 1]; 0 when either side is empty (after article removal)
/// or nothing overlaps.
double tokenF1(const std::vector<std::string>& prediction, const std::vector<std::string>& truth);
/// The same over `Words`; with `drop_articles`, a/an/the are left out of both sides first.
double tokenF1(const Words& prediction, const Words& truth, bool drop_articles);

/// `tokenize()` minus the English articles, as SQuAD's `normalize_answer`.
std::vector<std::string> squadTokens(std::string_view text);

/// Score = token F1 of the answer against the reference; outcome `no_reference` without one.
/// Citation markers ("[1]") are removed from both sides first (`stripCitationMarkers`).
class TokenF1Judge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

}  // namespace assay
