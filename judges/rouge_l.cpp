#include "judges/rouge_l.hpp"

#include <algorithm>

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

std::size_t lcsLength(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const auto& longer = a.size() >= b.size() ? a : b;
  const auto& shorter = a.size() >= b.size() ? b : a;
  std::vector<std::size_t> row(shorter.size() + 1, 0);
  for (const auto& x : longer) {
    std::size_t diag = 0;  // row[j-1] of the previous iteration
    for (std::size_t j = 1; j <= shorter.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = (x == shorter[j - 1]) ? diag + 1 : std::max(row[j], row[j - 1]);
      diag = up;
    }
  }
  return row.back();
}

RougeScore rougeL(const std::vector<std::string>& candidate,
                  const std::vector<std::string>& reference) {
  RougeScore s;
  if (candidate.empty() || reference.empty()) return s;
  s.lcs = lcsLength(candidate, reference);
  if (s.lcs == 0) return s;
  s.precision = static_cast<double>(s.lcs) / static_cast<double>(candidate.size());
  s.recall = static_cast<double>(s.lcs) / static_cast<double>(reference.size());
  s.f = 2 * s.precision * s.recall / (s.precision + s.recall);
  return s;
}

std::unique_ptr<Judge> RougeLJudge::create(const JudgeOptionValues&) {
  return std::make_unique<RougeLJudge>();
}

Verdict RougeLJudge::judge(const Event& e) const {
  if (!e.reference) return Verdict::fail(Outcome::kNoReference);
  auto ref = tokenize(stripCitationMarkers(*e.reference));
  if (ref.empty()) return Verdict::fail(Outcome::kNoReference, "reference has no tokens");
  const auto cand = tokenize(stripCitationMarkers(e.answer));
  if (cand.size() * ref.size() > kMaxLcsCells)
    return Verdict::fail(Outcome::kTooLong,
                         std::to_string(cand.size()) + " × " + std::to_string(ref.size()) +
                             " tokens: more than the LCS computes in bounded time");
  const auto s = rougeL(cand, ref);
  return Verdict::ok(s.f, "lcs " + std::to_string(s.lcs));
}

}  // namespace assay
