#pragma once
/// Token F1 as in the SQuAD evaluation script (Rajpurkar et al., EMNLP 2016; official
/// `evaluate-v2.0.py`): normalise (lower-case, strip punctuation, drop the articles a/an/the,
/// collapse whitespace), then F1 of the multiset overlap of tokens. Tokens come from the shared
/// tokenizer (judges/tokenizer.hpp), which differs from SQuAD's whitespace split: CJK text is
/// compared per character, "3.5" stays one token, "l'école" is two. Unlike SQuAD's
/// `compute_f1`, two empty sides score 0, not 1 (the judge gives `no_reference` before that).
/// Threads: the functions keep thread_local scratch; any number of threads may call them.

#include <string>
#include <string_view>
#include <vector>

#include "judges/judge.hpp"
#include "judges/tokenizer.hpp"

namespace assay {

/// Multiset-overlap F1 in [0, 1] of two token lists taken as they are (pass `squadTokens` to
/// drop the articles); 0 when either side is empty or nothing overlaps.
double tokenF1(const std::vector<std::string>& prediction, const std::vector<std::string>& truth);
/// The same over `Words`; with `drop_articles`, a/an/the are left out of both sides first.
double tokenF1(const Words& prediction, const Words& truth, bool drop_articles);

/// `tokenize()` minus the English articles, as SQuAD's `normalize_answer`.
std::vector<std::string> squadTokens(std::string_view text);

/// Score = token F1 of the answer against the reference, articles dropped and citation markers
/// ("[1]") skipped on both sides. Outcome `no_reference` when the event has no reference or
/// its reference has no token but articles ("The"). An empty answer scores 0.
class TokenF1Judge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  Verdict judge(const Event& event) const override;
};

}  // namespace assay
