#include "judges/retrieval.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace assay {
namespace {

constexpr OptionSpec kRetrievalOptions[] = {
    {"k", OptionType::kInt, "rank cut-off k (top k retrieved chunks), >= 1; default 5", true, "5"},
};

RetrievalJudgeOptions parseOptions(const JudgeOptionValues& values) {
  const auto k = values.getInt("k", 5);
  if (k < 1) throw OptionError("k", "must be at least 1");
  return RetrievalJudgeOptions{static_cast<int>(std::min<std::int64_t>(k, 1'000'000))};
}

Verdict judgeRetrieval(RetrievalMetric metric, const Event& e, int k) {
  if (!e.relevant_context_ids || e.relevant_context_ids->empty()) {
    return Verdict::fail(Outcome::kNoGroundTruth);
  }
  std::vector<std::string> ids;
  ids.reserve(e.contexts.size());
  for (const auto& c : e.contexts) {
    if (c.id.empty()) return Verdict::fail(Outcome::kNoContextIds);
    ids.push_back(c.id);
  }
  return Verdict::ok(retrievalScore(metric, ids, *e.relevant_context_ids, k));
}

const std::vector<double> kRankBuckets = {0.0, 0.2, 0.34, 0.5, 0.75, 1.0};

}  // namespace

double retrievalScore(RetrievalMetric metric, const std::vector<std::string>& retrieved,
                      const std::vector<std::string>& relevant, int k) {
  const std::unordered_set<std::string> rel(relevant.begin(), relevant.end());
  const std::size_t depth = std::min(retrieved.size(), static_cast<std::size_t>(k));
  switch (metric) {
    case RetrievalMetric::kHitRate:
      for (std::size_t i = 0; i < depth; ++i)
        if (rel.count(retrieved[i])) return 1.0;
      return 0.0;
    case RetrievalMetric::kMrr:
      for (std::size_t i = 0; i < depth; ++i)
        if (rel.count(retrieved[i])) return 1.0 / static_cast<double>(i + 1);
      return 0.0;
    case RetrievalMetric::kNdcg: {
      double dcg = 0, idcg = 0;
      std::unordered_set<std::string> seen;  // a chunk retrieved twice counts once
      for (std::size_t i = 0; i < depth; ++i) {
        if (rel.count(retrieved[i]) && seen.insert(retrieved[i]).second)
          dcg += 1.0 / std::log2(static_cast<double>(i) + 2.0);
      }
      const std::size_t ideal = std::min(rel.size(), static_cast<std::size_t>(k));
      for (std::size_t i = 0; i < ideal; ++i) idcg += 1.0 / std::log2(static_cast<double>(i) + 2.0);
      return idcg > 0 ? dcg / idcg : 0.0;
    }
  }
  return 0.0;
}

const JudgeDescriptor HitRateJudge::kDescriptor{
    "hit_rate",
    JudgeKind::kRetrieval,
    "retrieval_relevance",
    0.0,
    1.0,
    kPassFailBuckets,
    kRetrievalOptions,
    CostClass::kCpuMicroseconds,
    "1 if a ground-truth relevant chunk is among the top k retrieved, else 0"};
const JudgeDescriptor MrrJudge::kDescriptor{
    "mrr",
    JudgeKind::kRetrieval,
    "retrieval_relevance",
    0.0,
    1.0,
    kRankBuckets,
    kRetrievalOptions,
    CostClass::kCpuMicroseconds,
    "reciprocal rank of the first relevant chunk within the top k"};
const JudgeDescriptor NdcgJudge::kDescriptor{"ndcg",
                                             JudgeKind::kRetrieval,
                                             "retrieval_relevance",
                                             0.0,
                                             1.0,
                                             kUnitIntervalBuckets,
                                             kRetrievalOptions,
                                             CostClass::kCpuMicroseconds,
                                             "nDCG@k with binary relevance and log2 discount"};

std::unique_ptr<Judge> HitRateJudge::create(const JudgeOptionValues& v) {
  return std::make_unique<HitRateJudge>(parseOptions(v));
}
std::unique_ptr<Judge> MrrJudge::create(const JudgeOptionValues& v) {
  return std::make_unique<MrrJudge>(parseOptions(v));
}
std::unique_ptr<Judge> NdcgJudge::create(const JudgeOptionValues& v) {
  return std::make_unique<NdcgJudge>(parseOptions(v));
}
Verdict HitRateJudge::judge(const Event& e) const {
  return judgeRetrieval(RetrievalMetric::kHitRate, e, options_.k);
}
Verdict MrrJudge::judge(const Event& e) const {
  return judgeRetrieval(RetrievalMetric::kMrr, e, options_.k);
}
Verdict NdcgJudge::judge(const Event& e) const {
  return judgeRetrieval(RetrievalMetric::kNdcg, e, options_.k);
}

}  // namespace assay
