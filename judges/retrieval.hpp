#pragma once
/// Retrieval metrics against ground truth (`relevant_context_ids`), with binary relevance:
/// a retrieved chunk is relevant iff its id is in the ground-truth set. They say whether a bad
/// answer is a retrieval fault, upstream of generation. Ranks are 1-based; `k` cuts the list.
///  - hit rate@k: 1 if any of the top k is relevant, else 0;
///  - MRR@k: 1 / rank of the first relevant chunk within the top k, else 0
///    (Voorhees, TREC-8 QA track, 1999);
///  - nDCG@k: DCG = Σ_{i≤k} rel_i / log2(i + 1), divided by the ideal DCG of
///    min(k, |relevant|) relevant chunks at the top (Järvelin & Kekäläinen, TOIS 2002).
/// Outcomes: `no_ground_truth` without `relevant_context_ids` (or an empty list),
/// `no_context_ids` when contexts were given as plain strings. Empty contexts score 0: the
/// retriever found nothing relevant, which is a real retrieval fault.

#include <string>
#include <vector>

#include "judges/judge.hpp"

namespace assay {

enum class RetrievalMetric { kHitRate, kMrr, kNdcg };

/// `retrieved` in rank order; `relevant` must be non-empty; k ≥ 1. Result in [0, 1].
double retrievalScore(RetrievalMetric metric, const std::vector<std::string>& retrieved,
                      const std::vector<std::string>& relevant, int k);

struct RetrievalJudgeOptions {
  int k = 5;  ///< cut-off, ≥ 1
};

class HitRateJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit HitRateJudge(RetrievalJudgeOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  RetrievalJudgeOptions options_;
};

class MrrJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit MrrJudge(RetrievalJudgeOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  RetrievalJudgeOptions options_;
};

class NdcgJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit NdcgJudge(RetrievalJudgeOptions o) : options_(o) {}
  Verdict judge(const Event& event) const override;

 private:
  RetrievalJudgeOptions options_;
};

}  // namespace assay
