#include "judges/bleu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "judges/tokenizer.hpp"

namespace assay {
namespace {

constexpr OptionSpec kBleuOptions[] = {
    {"max_order", OptionType::kInt, "highest n-gram order N (BLEU-N), 1..8; default 4"},
};

// N-grams are counted over token ids (one vocabulary for hypothesis and references), each
// n-gram keyed by the bytes of its ids: a short string hashed once, instead of a vector of
// strings compared token by token.
using Ids = std::vector<std::uint32_t>;
using NgramCounts = std::unordered_map<std::string, int>;

Ids toIds(const std::vector<std::string>& tokens,
          std::unordered_map<std::string_view, std::uint32_t>& vocab) {
  Ids ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) {
    ids.push_back(vocab.emplace(t, static_cast<std::uint32_t>(vocab.size())).first->second);
  }
  return ids;
}

NgramCounts countNgrams(const Ids& ids, int n) {
  NgramCounts counts;
  if (ids.size() < static_cast<std::size_t>(n)) return counts;
  counts.reserve(ids.size());
  const std::size_t width = sizeof(std::uint32_t) * static_cast<std::size_t>(n);
  for (std::size_t i = 0; i + n <= ids.size(); ++i) {
    ++counts[std::string(reinterpret_cast<const char*>(ids.data() + i), width)];
  }
  return counts;
}

// The same counts keyed by the n-gram's ids packed 16 bits each into one integer: exact while
// the vocabulary has fewer than 2^16 tokens and n ≤ 4 (every event of normal size, BLEU-4),
// without a string per n-gram.
using PackedCounts = std::unordered_map<std::uint64_t, int>;
constexpr std::size_t kPackedVocab = 1u << 16;
constexpr int kPackedMaxOrder = 4;

PackedCounts countPacked(const Ids& ids, int n) {
  PackedCounts counts;
  if (ids.size() < static_cast<std::size_t>(n)) return counts;
  counts.reserve(ids.size());
  for (std::size_t i = 0; i + n <= ids.size(); ++i) {
    std::uint64_t key = 0;
    for (int k = 0; k < n; ++k) key = (key << 16) | ids[i + static_cast<std::size_t>(k)];
    ++counts[key];
  }
  return counts;
}

// Clipped matches and the hypothesis's n-gram count at order n (Papineni et al. 2002, eq. 1).
template <class Counts, class Count>
std::pair<long, long> clipped(const Ids& hyp_ids, const std::vector<Ids>& ref_ids, int n,
                              Count count) {
  const Counts hyp = count(hyp_ids, n);
  Counts max_ref;
  for (const auto& ref : ref_ids) {
    for (const auto& [g, c] : count(ref, n)) {
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
  return {matched, total};
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
  std::unordered_map<std::string_view, std::uint32_t> vocab;
  const Ids hyp_ids = toIds(hypothesis, vocab);
  std::vector<Ids> ref_ids;
  ref_ids.reserve(references.size());
  for (const auto& ref : references) ref_ids.push_back(toIds(ref, vocab));
  double log_sum = 0.0;
  const bool packed = vocab.size() < kPackedVocab && max_order <= kPackedMaxOrder;
  for (int n = 1; n <= max_order; ++n) {
    const auto [matched, total] = packed ? clipped<PackedCounts>(hyp_ids, ref_ids, n, countPacked)
                                         : clipped<NgramCounts>(hyp_ids, ref_ids, n, countNgrams);
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
