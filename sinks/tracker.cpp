#include "sinks/tracker.hpp"

namespace assay {
namespace {
prometheus::Family<prometheus::Gauge>& gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}
}  // namespace

ScoreTracker::Judge::Judge(const TrackedJudge& s, const TrackingOptions& o)
    : spec(s),
      window(static_cast<std::size_t>(o.window), s.min_score, s.max_score),
      drift(stats::DriftOptions{static_cast<std::size_t>(o.baseline_window),
                                static_cast<std::size_t>(o.recent_window), o.drift_alpha,
                                o.drift_min_delta, o.rolling_baseline}) {}

ScoreTracker::ScoreTracker(const std::vector<TrackedJudge>& judges, const TrackingOptions& options,
                           prometheus::Registry& registry)
    : options_(options),
      max_ratio_(gauge(registry, "assay_judge_max_score_ratio",
                       "Share of the judge's recent scores at its top score")),
      lenient_(gauge(registry, "assay_judge_lenient",
                     "1 when the top-score share exceeds tracking.leniency_max_ratio")),
      mean_(gauge(registry, "assay_score_window_mean", "Mean of the recent window of scores")),
      baseline_(gauge(registry, "assay_score_baseline_mean", "Mean of the drift baseline")),
      drift_(gauge(registry, "assay_score_drift",
                   "1 when recent scores differ from the baseline (Mann-Whitney p < drift_alpha "
                   "and the mean moved at least drift_min_delta)")) {
  for (const auto& j : judges) judges_.push_back(std::make_unique<Judge>(j, options));
}

void ScoreTracker::record(std::size_t index, double score) {
  auto& j = *judges_[index];
  std::lock_guard lock(j.mu);
  if (j.window.add(score)) j.drift.add(score);
}

void ScoreTracker::refresh() {
  for (auto& jp : judges_) {
    auto& j = *jp;
    std::optional<stats::WindowSummary> summary;
    std::optional<stats::DriftResult> drift;
    {
      std::lock_guard lock(j.mu);
      summary = j.window.summary(options_.leniency_max_ratio,
                                 static_cast<std::size_t>(options_.min_samples));
      drift = j.drift.evaluate();
    }
    const prometheus::Labels labels{{"judge", j.spec.name}, {"criterion", j.spec.criterion}};
    if (summary) {
      if (!j.max_ratio) {
        j.max_ratio = &max_ratio_.Add(labels);
        j.mean = &mean_.Add(labels);
      }
      j.max_ratio->Set(summary->top_share);
      j.mean->Set(summary->mean);
      if (summary->n >= static_cast<std::size_t>(options_.min_samples)) {
        if (!j.lenient) j.lenient = &lenient_.Add(labels);
        j.lenient->Set(summary->lenient ? 1 : 0);
      }
    }
    if (drift) {
      if (!j.drifting) {
        j.drifting = &drift_.Add(labels);
        j.baseline = &baseline_.Add(labels);
      }
      j.drifting->Set(drift->drift ? 1 : 0);
      j.baseline->Set(drift->baseline_mean);
    }
  }
}

}  // namespace assay
