#pragma once
/// Coverage you can add up (docs/metrics.md, "Coverage"): every message of the events topic
/// ends in exactly one terminal counter per judge. For each judge J, at any moment,
///
///   assay_events_consumed_total
///     = assay_events_replay_skipped_total + Σ assay_events_invalid_total
///     + assay_events_sampled_out_total + Σ assay_samples_dropped_total
///     + Σ assay_judge_runs_total{judge=J} + Σ assay_judge_skipped_total{judge=J}
///     + assay_judge_abandoned_total{judge=J}
///     + in flight (consumed − assay_events_finished_total)
///
/// summed over J's versions. The config/prometheus/assay-rules.yml recording rules
/// assay:events_in_flight and assay:judge_coverage_unaccounted:events compute the same, from a
/// scrape; this computes it from a registry (the exit summary, tests).

#include <prometheus/metric_family.h>

#include <map>
#include <string>
#include <vector>

namespace assay {

struct Coverage {
  double consumed = 0, finished = 0;  ///< assay_events_consumed_total, _finished_total
  /// Per judge name: finished events that no terminal counter of the judge accounts for
  /// (the rule's assay:judge_coverage_unaccounted:events): 0 when the identity holds, negative
  /// while the counters of an event are being counted, positive never unless events are lost.
  std::map<std::string, double> unaccounted;
  double inFlight() const { return consumed - finished; }
};

/// The identity's terms from the collected families (Registry::Collect()).
Coverage coverageOf(const std::vector<prometheus::MetricFamily>& families);

}  // namespace assay
