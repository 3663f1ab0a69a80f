#include "judges/token_f1.hpp"

#include <algorithm>
#include <unordered_map>

#include "judges/tokenizer.hpp"

namespace assay {

const JudgeDescriptor TokenF1Judge::kDescriptor{
    "token_f1",
    JudgeKind::kLexical,
    "answer_correctness",
    0.0,
    1.0,
    kUnitIntervalBuckets,
    {},
    CostClass::kCpuMicroseconds,
    "SQuAD token F1 of the answer against the reference"};

std::vector<std::string> squadTokens(std::string_view text) {
  auto tokens = tokenize(text);
  std::erase_if(tokens, [](const std::string& t) { return t == "a" || t == "an" || t == "the"; });
  return tokens;
}

double tokenF1(const std::vector<std::string>& prediction, const std::vector<std::string>& truth) {
  if (prediction.empty() || truth.empty()) return 0.0;
  std::unordered_map<std::string_view, long> counts;
  for (const auto& t : truth) ++counts[t];
  long same = 0;
  for (const auto& t : prediction) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double p = static_cast<double>(same) / static_cast<double>(prediction.size());
  const double r = static_cast<double>(same) / static_cast<double>(truth.size());
  return 2 * p * r / (p + r);
}

std::unique_ptr<Judge> TokenF1Judge::create(const JudgeOptionValues&) {
  return std::make_unique<TokenF1Judge>();
}

Verdict TokenF1Judge::judge(const Event& e) const {
  if (!e.reference) return Verdict::fail(Outcome::kNoReference);
  auto truth = squadTokens(stripCitationMarkers(*e.reference));
  if (truth.empty()) return Verdict::fail(Outcome::kNoReference, "reference has no tokens");
  return Verdict::ok(tokenF1(squadTokens(stripCitationMarkers(e.answer)), truth));
}

}  // namespace assay
