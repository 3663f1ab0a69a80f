#include "judges/token_f1.hpp"

#include <algorithm>
#include <cstdint>

#include "judges/token_ids.hpp"
#include "judges/tokenizer.hpp"

namespace assay {
namespace {
bool isArticle(std::string_view t) {
  return t.size() <= 3 && (t == "a" || t == "an" || t == "the");
}
}  // namespace

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
  std::erase_if(tokens, [](const std::string& t) { return isArticle(t); });
  return tokens;
}

double tokenF1(const Words& prediction, const Words& truth, bool drop_articles) {
  thread_local TokenIds ids;
  thread_local std::vector<std::int32_t> counts;
  ids.reset(truth.size());
  counts.clear();
  long n_truth = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    if (drop_articles && isArticle(truth[i])) continue;
    ++n_truth;
    const std::uint32_t id = ids.intern(truth.hashes[i], truth[i]);
    if (id == counts.size()) counts.push_back(0);
    ++counts[id];
  }
  long n_pred = 0, same = 0;
  for (std::size_t i = 0; i < prediction.size(); ++i) {
    if (drop_articles && isArticle(prediction[i])) continue;
    ++n_pred;
    const std::uint32_t id = ids.find(prediction.hashes[i], prediction[i]);
    if (id != TokenIds::kAbsent && counts[id] > 0) {
      --counts[id];
      ++same;
    }
  }
  if (n_pred == 0 || n_truth == 0 || same == 0) return 0.0;
  const double p = static_cast<double>(same) / static_cast<double>(n_pred);
  const double r = static_cast<double>(same) / static_cast<double>(n_truth);
  return 2 * p * r / (p + r);
}

double tokenF1(const std::vector<std::string>& prediction, const std::vector<std::string>& truth) {
  Words p, t;
  for (const auto& x : prediction) p.push(x);
  for (const auto& x : truth) t.push(x);
  return tokenF1(p, t, /*drop_articles=*/false);
}

std::unique_ptr<Judge> TokenF1Judge::create(const JudgeOptionValues&) {
  return std::make_unique<TokenF1Judge>();
}

Verdict TokenF1Judge::judge(const Event& e) const {
  if (!e.reference) return Verdict::fail(Outcome::kNoReference);
  const Words& truth = cachedWords(*e.reference, /*skip_citation_markers=*/true, 0);
  bool any = false;
  for (std::size_t i = 0; i < truth.size() && !any; ++i) any = !isArticle(truth[i]);
  if (!any) return Verdict::fail(Outcome::kNoReference, "reference has no tokens");
  const Words& prediction = cachedWords(e.answer, /*skip_citation_markers=*/true, 1);
  return Verdict::ok(tokenF1(prediction, truth, /*drop_articles=*/true));
}

}  // namespace assay
