#include "judges/rouge_l.hpp"

#include <algorithm>
#include <cstdint>

#include "judges/token_ids.hpp"
#include "judges/tokenizer.hpp"

namespace assay {
namespace {
const Outcome kOutcomes[] = {Outcome::kNoReference,  Outcome::kNoContext,  Outcome::kNoGroundTruth,
                             Outcome::kNoContextIds, Outcome::kEmptyInput, Outcome::kNotApplicable,
                             Outcome::kTooLong};
}  // namespace

const JudgeDescriptor RougeLJudge::kDescriptor{
    "rouge_l",
    JudgeKind::kLexical,
    "answer_correctness",
    0.0,
    1.0,
    kUnitIntervalBuckets,
    {},
    CostClass::kCpuMicroseconds,
    "ROUGE-L F-measure of the answer against the reference (LCS of word tokens)",
    kOutcomes};

std::size_t lcsLength(const Words& a, const Words& b) {
  // Bit-parallel LCS length (Allison & Dix 1986; Hyyrö, "Bit-parallel LCS-length computation
  // revisited", AWOCA 2004): the shorter side is the bit pattern, one bit per position; a
  // zero bit of V marks a position that ends a longest common subsequence step. Per token of
  // the other side: U = V & M[token], V = (V + U) | (V - U), with V - U = V & ~M[token].
  // LCS = the number of zero bits of V. O(|a|·|b| / 64) time.
  const Words& pattern = a.size() <= b.size() ? a : b;
  const Words& text = a.size() <= b.size() ? b : a;
  const std::size_t m = pattern.size();
  if (m == 0) return 0;
  const std::size_t words = (m + 63) / 64;
  thread_local TokenIds ids;
  thread_local std::vector<std::uint64_t> masks, v;
  ids.reset(m);
  masks.clear();
  for (std::size_t p = 0; p < m; ++p) {
    const std::uint32_t id = ids.intern(pattern.hashes[p], pattern[p]);
    if (id * words >= masks.size()) masks.resize((id + 1) * words, 0);
    masks[id * words + p / 64] |= std::uint64_t{1} << (p % 64);
  }
  v.assign(words, ~std::uint64_t{0});
  for (std::size_t t = 0; t < text.size(); ++t) {
    const std::uint32_t id = ids.find(text.hashes[t], text[t]);
    if (id == TokenIds::kAbsent) continue;  // U = 0: V unchanged
    const std::uint64_t* mk = masks.data() + static_cast<std::size_t>(id) * words;
    unsigned carry = 0;
    for (std::size_t k = 0; k < words; ++k) {
      const std::uint64_t x = v[k];
      const std::uint64_t u = x & mk[k];
      std::uint64_t sum = 0;
      const unsigned c1 = __builtin_add_overflow(x, u, &sum);
      const unsigned c2 = __builtin_add_overflow(sum, std::uint64_t{carry}, &sum);
      carry = c1 | c2;
      v[k] = sum | (x & ~mk[k]);
    }
  }
  std::size_t ones = 0;
  for (std::size_t k = 0; k < words; ++k) {
    std::uint64_t x = v[k];
    if (k + 1 == words && m % 64 != 0) x &= (std::uint64_t{1} << (m % 64)) - 1;
    ones += static_cast<std::size_t>(__builtin_popcountll(x));
  }
  if (masks.capacity() > (std::size_t{1} << 17)) std::vector<std::uint64_t>().swap(masks);
  return m - ones;
}

std::size_t lcsLength(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  Words wa, wb;
  for (const auto& t : a) wa.push(t);
  for (const auto& t : b) wb.push(t);
  return lcsLength(wa, wb);
}

RougeScore rougeL(const Words& candidate, const Words& reference) {
  RougeScore s;
  if (candidate.empty() || reference.empty()) return s;
  s.lcs = lcsLength(candidate, reference);
  if (s.lcs == 0) return s;
  s.precision = static_cast<double>(s.lcs) / static_cast<double>(candidate.size());
  s.recall = static_cast<double>(s.lcs) / static_cast<double>(reference.size());
  s.f = 2 * s.precision * s.recall / (s.precision + s.recall);
  return s;
}

RougeScore rougeL(const std::vector<std::string>& candidate,
                  const std::vector<std::string>& reference) {
  Words c, r;
  for (const auto& t : candidate) c.push(t);
  for (const auto& t : reference) r.push(t);
  return rougeL(c, r);
}

std::unique_ptr<Judge> RougeLJudge::create(const JudgeOptionValues&) {
  return std::make_unique<RougeLJudge>();
}

Verdict RougeLJudge::judge(const Event& e) const {
  if (!e.reference) return Verdict::fail(Outcome::kNoReference);
  const Words& ref = cachedWords(*e.reference, /*skip_citation_markers=*/true, 0);
  if (ref.empty()) return Verdict::fail(Outcome::kNoReference, "reference has no tokens");
  const Words& cand = cachedWords(e.answer, /*skip_citation_markers=*/true, 1);
  if (cand.size() * ref.size() > kMaxLcsCells)
    return Verdict::fail(Outcome::kTooLong,
                         std::to_string(cand.size()) + " × " + std::to_string(ref.size()) +
                             " tokens: more than the LCS computes in bounded time");
  const auto s = rougeL(cand, ref);
  return Verdict::ok(s.f, "lcs " + std::to_string(s.lcs));
}

}  // namespace assay
