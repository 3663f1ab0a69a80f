#pragma once
/// Tracks every judge's successful scores (failures never enter) and exports, per judge ×
/// criterion, the distribution signals of CONTRACT.md §7:
///   assay_judge_max_score_ratio  share of the window at the judge's top score
///   assay_judge_lenient          1 when that share exceeds tracking.leniency_max_ratio over at
///                                least tracking.min_samples scores
///   assay_score_window_mean, assay_score_baseline_mean, assay_score_drift (0/1, Mann–Whitney)
/// A series appears only once its statistic is defined (never 0 or NaN in its place).
/// record() is called by workers and LLM callbacks; refresh() by the poll loop.

#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "judges/stats/window.hpp"

namespace assay {

struct TrackedJudge {
  std::string name, criterion;
  double min_score, max_score;
};

class ScoreTracker {
 public:
  ScoreTracker(const std::vector<TrackedJudge>& judges, const TrackingOptions& options,
               prometheus::Registry& registry);
  /// A successful score of judge `index` (out-of-scale or non-finite scores are ignored).
  void record(std::size_t index, double score);
  /// Recomputes every summary and sets the gauges.
  void refresh();

 private:
  struct Judge {
    TrackedJudge spec;
    std::mutex mu;
    stats::ScoreWindow window;
    stats::DriftDetector drift;
    prometheus::Gauge *max_ratio = nullptr, *lenient = nullptr, *mean = nullptr,
                      *baseline = nullptr, *drifting = nullptr;
    Judge(const TrackedJudge& s, const TrackingOptions& o);
  };
  TrackingOptions options_;
  prometheus::Family<prometheus::Gauge>&max_ratio_, &lenient_, &mean_, &baseline_, &drift_;
  std::vector<std::unique_ptr<Judge>> judges_;
};

}  // namespace assay
