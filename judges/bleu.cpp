#include "judges/bleu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "judges/tokenizer.hpp"

namespace assay {
namespace {

constexpr OptionSpec kBleuOptions[] = {
    {"max_order", OptionType::kInt, "highest n-gram order N (BLEU-N), 1..8; default 4"},
};

using NgramCounts = std::map<std::vector<std::string>, int>;

NgramCounts countNgrams(const std::vector<std::string>& tokens, int n) {
  NgramCounts counts;
  if (tokens.size() < static_cast<std::size_t>(n)) return counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
    ++counts[std::vector<std::string>(tokens.begin() + i, tokens.begin() + i + n)];
  }
  return counts;
}

}  // namespace

const JudgeDescriptor BleuJudge::kDescriptor{
    "bleu",
    JudgeKind::kLexical,
    "answer_correctness",
    0.0,
    1.0,
    {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0},
    kBleuOptions,
    CostClass::kCpuMicroseconds,
    "sentence BLEU-N of the answer against the reference (nltk method1 smoothing)"};

double sentenceBleu(const std::vector<std::vector<std::string>>& references,
                    const std::vector<std::string>& hypothesis, int max_order) {
  if (hypothesis.empty() || references.empty()) return 0.0;
  double log_sum = 0.0;
  for (int n = 1; n <= max_order; ++n) {
    const NgramCounts hyp = countNgrams(hypothesis, n);
    std::map<std::vector<std::string>, int> max_ref;
    for (const auto& ref : references) {
      for (const auto& [g, c] : countNgrams(ref, n)) {
        auto& m = max_ref[g];
        m = std::max(m, c);
      }
    }
    long matched = 0, total = 0;
    for (const auto& [g, c] : hyp) {
      total += c;
      auto it = max_ref.find(g);
      if (it != max_ref.end()) matched += std::min(c, it->second);
    }
    if (n == 1 && matched == 0) return 0.0;  // nltk: no unigram match → 0
    const double denom = static_cast<double>(std::max(1L, total));
    const double p = matched == 0 ? 0.1 / denom : static_cast<double>(matched) / denom;
    log_sum += std::log(p) / max_order;
  }
  const auto c = static_cast<long>(hypothesis.size());
  long r = static_cast<long>(references.front().size());
  for (const auto& ref : references) {
    const long len = static_cast<long>(ref.size());
    if (std::labs(len - c) < std::labs(r - c) ||
        (std::labs(len - c) == std::labs(r - c) && len < r))
      r = len;
  }
  const double bp = c > r ? 1.0 : std::exp(1.0 - static_cast<double>(r) / static_cast<double>(c));
  return bp * std::exp(log_sum);
}

std::unique_ptr<Judge> BleuJudge::create(const JudgeOptionValues& values) {
  BleuJudgeOptions o;
  const auto n = values.getInt("max_order", 4);
  if (n < 1 || n > 8) throw OptionError("max_order", "must be between 1 and 8");
  o.max_order = static_cast<int>(n);
  return std::make_unique<BleuJudge>(o);
}

Verdict BleuJudge::judge(const Event& e) const {
  if (!e.reference) return Verdict::fail(Outcome::kNoReference);
  auto ref = tokenize(stripCitationMarkers(*e.reference));
  if (ref.empty()) return Verdict::fail(Outcome::kNoReference, "reference has no tokens");
  return Verdict::ok(
      sentenceBleu({ref}, tokenize(stripCitationMarkers(e.answer)), options_.max_order));
}

}  // namespace assay
