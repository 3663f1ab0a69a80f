#include "judges/bleu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "judges/token_ids.hpp"
#include "judges/tokenizer.hpp"

namespace assay {
namespace {

constexpr OptionSpec kBleuOptions[] = {
    {"max_order", OptionType::kInt, "highest n-gram order N (BLEU-N), 1..8; default 4", true, "4"},
};

// N-grams are counted over token ids (one vocabulary for hypothesis and references), each
// n-gram keyed by the bytes of its ids: a short string hashed once, instead of a vector of
// strings compared token by token.
using Ids = std::vector<std::uint32_t>;
using NgramCounts = std::unordered_map<std::string, int>;

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

// Clipped matches and the hypothesis's n-gram count at order n (Papineni et al. 2002, eq. 1),
// n-grams keyed by their ids' bytes: any vocabulary size and order.
std::pair<long, long> clippedGeneric(const Ids& hyp_ids, const std::vector<Ids>& ref_ids, int n) {
  const NgramCounts hyp = countNgrams(hyp_ids, n);
  NgramCounts max_ref;
  for (const auto& ref : ref_ids) {
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
  return {matched, total};
}

// The same with each n-gram's ids (+1, so that no key is 0) packed 16 bits each into one
// integer, counted in a flat open-addressing table: exact while the vocabulary has fewer than
// 2^16 - 1 tokens and n ≤ 4 (every event of normal size, BLEU-4), without a string per n-gram.
constexpr std::size_t kPackedVocab = (1u << 16) - 1;
constexpr int kPackedMaxOrder = 4;

class PackedClipper {
 public:
  std::pair<long, long> operator()(const Ids& hyp_ids, const std::vector<Ids>& ref_ids, int n) {
    const std::size_t width = static_cast<std::size_t>(n);
    if (hyp_ids.size() < width) return {0, 0};
    reset(hyp_ids.size() - width + 1);
    long total = 0;
    for (std::size_t i = 0; i + width <= hyp_ids.size(); ++i) {
      const std::uint64_t k = key(hyp_ids, i, width);
      Slot& s = probe(k);
      if (s.key == 0) {
        s.key = k;
        used_.push_back(static_cast<std::uint32_t>(&s - slots_.data()));
      }
      ++s.hyp;
      ++total;
    }
    for (const auto& ref : ref_ids) {
      for (std::size_t i = 0; i + width <= ref.size(); ++i) {
        Slot& s = probe(key(ref, i, width));
        if (s.key != 0) ++s.cur;  // only the hypothesis's n-grams matter
      }
      for (const std::uint32_t u : used_) {
        Slot& s = slots_[u];
        s.best = std::max(s.best, s.cur);
        s.cur = 0;
      }
    }
    long matched = 0;
    for (const std::uint32_t u : used_) matched += std::min(slots_[u].hyp, slots_[u].best);
    return {matched, total};
  }

 private:
  struct Slot {
    std::uint64_t key = 0;  ///< 0: empty
    int hyp = 0, cur = 0, best = 0;
  };

  static std::uint64_t key(const Ids& ids, std::size_t at, std::size_t width) {
    std::uint64_t k = 0;
    for (std::size_t j = 0; j < width; ++j) k = (k << 16) | (ids[at + j] + 1);
    return k;
  }

  void reset(std::size_t expected) {
    std::size_t cap = 64;
    while (cap < 2 * expected) cap *= 2;
    if (slots_.size() != cap)
      slots_.assign(cap, Slot{});
    else
      for (const std::uint32_t u : used_) slots_[u] = Slot{};
    used_.clear();
  }

  Slot& probe(std::uint64_t k) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = ((k * 0x9E3779B97F4A7C15ull) >> 32) & mask;; i = (i + 1) & mask)
      if (slots_[i].key == k || slots_[i].key == 0) return slots_[i];
  }

  std::vector<Slot> slots_;
  std::vector<std::uint32_t> used_;
};

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

double sentenceBleu(std::span<const Words> references, const Words& hypothesis, int max_order) {
  if (hypothesis.empty() || references.empty()) return 0.0;
  thread_local TokenIds vocab;
  thread_local Ids hyp_ids;
  thread_local std::vector<Ids> ref_ids;
  thread_local PackedClipper packed_clipper;
  std::size_t tokens = hypothesis.size();
  for (const auto& ref : references) tokens += ref.size();
  vocab.reset(tokens);
  auto toIds = [&](const Words& w, Ids& ids) {
    ids.clear();
    for (std::size_t i = 0; i < w.size(); ++i) ids.push_back(vocab.intern(w.hashes[i], w[i]));
  };
  toIds(hypothesis, hyp_ids);
  ref_ids.resize(references.size());
  for (std::size_t k = 0; k < references.size(); ++k) toIds(references[k], ref_ids[k]);
  double log_sum = 0.0;
  const bool packed = vocab.size() < kPackedVocab && max_order <= kPackedMaxOrder;
  for (int n = 1; n <= max_order; ++n) {
    const auto [matched, total] =
        packed ? packed_clipper(hyp_ids, ref_ids, n) : clippedGeneric(hyp_ids, ref_ids, n);
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

double sentenceBleu(const std::vector<std::vector<std::string>>& references,
                    const std::vector<std::string>& hypothesis, int max_order) {
  std::vector<Words> refs(references.size());
  for (std::size_t k = 0; k < references.size(); ++k)
    for (const auto& t : references[k]) refs[k].push(t);
  Words hyp;
  for (const auto& t : hypothesis) hyp.push(t);
  return sentenceBleu(refs, hyp, max_order);
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
  const Words& ref = cachedWords(*e.reference, /*skip_citation_markers=*/true, 0);
  if (ref.empty()) return Verdict::fail(Outcome::kNoReference, "reference has no tokens");
  const Words& hyp = cachedWords(e.answer, /*skip_citation_markers=*/true, 1);
  return Verdict::ok(sentenceBleu(std::span<const Words>(&ref, 1), hyp, options_.max_order));
}

}  // namespace assay
