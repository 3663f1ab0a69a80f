#pragma once
/// Every judge's series (docs/metrics.md), declared once here:
/// Each per-judge series also carries judge_version (core/judge_version.hpp), so that a new
/// version of a judge starts new series:
///   assay_judge_runs_total{judge, criterion, outcome}   one per run; outcome ok = a score
///   assay_judge_score{judge, criterion}                 histogram on the judge's own scale
///   assay_judge_latency_seconds{judge}                  wall time of one run, seconds
///   assay_judge_skipped_total{judge, reason}            sampled events the judge did not run
///                                                       on: reason rate (its nested rate),
///                                                       run_if (its condition did not hold) or
///                                                       not_configured (judged while a reload
///                                                       had removed it or not yet added it)
///   assay_judge_abandoned_total{judge}                  runs whose verdict never came: still
///                                                       outstanding when the process stopped
///                                                       (the event is redelivered)
///   assay_judge_pending_events                          sampled events whose asynchronous
///                                                       (LLM) verdicts are not all in
///   assay_judge_stalled{judge}                          1 while an asynchronous judge has runs
///                                                       outstanding and delivered no verdict
///                                                       for longer than it may (Judge::
///                                                       maxSilence), else 0
/// The outcomes a judge's type can produce (its descriptor's) exist from the start at 0; any
/// other is created on first use. The hot path holds a `Judge&` and never looks up a family.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <span>
#include <string>

#include "judges/judge.hpp"

namespace assay {

class JudgeStats {
 public:
  explicit JudgeStats(prometheus::Registry& registry);

  struct Judge {
    prometheus::Labels labels;  ///< judge and, when it has one, judge_version
    std::string criterion;
    std::array<std::atomic<prometheus::Counter*>, kOutcomeCount> runs{};  // by Outcome
    prometheus::Histogram* score = nullptr;
    prometheus::Histogram* latency = nullptr;       ///< seconds
    prometheus::Gauge* stalled = nullptr;           ///< 0 or 1, set by the pipeline each second
    prometheus::Counter* skipped_rate = nullptr;    ///< assay_judge_skipped_total{reason=rate}
    prometheus::Counter* skipped_run_if = nullptr;  ///< …{reason=run_if}
    prometheus::Counter* skipped_not_configured = nullptr;  ///< …{reason=not_configured}
    prometheus::Counter* abandoned = nullptr;               ///< assay_judge_abandoned_total
  };
  /// Adds one configured judge's series, labelled with its `version` (a judge added again, by a
  /// configuration reload, with the same version gets the same series: its counters go on; a
  /// new version gets new series, and the old version's stay as they were). Thread-safe; the
  /// result lives as long as this object.
  Judge& add(const std::string& name, const std::string& version, const JudgeInfo& info,
             std::span<const Outcome> outcomes);
  /// assay_judge_runs_total{…, outcome} += 1. Thread-safe.
  void countRun(Judge& judge, Outcome outcome);

 private:
  prometheus::Counter* countable(Judge& j, Outcome o);  // its runs series for o; mu_ held
  prometheus::Family<prometheus::Counter>& runs_;
  prometheus::Family<prometheus::Histogram>& scores_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Family<prometheus::Gauge>& stalled_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Counter>& abandoned_;
  std::mutex mu_;  // creating a series on first use
  std::deque<Judge> judges_;

 public:
  prometheus::Gauge& pending;  ///< assay_judge_pending_events, set by the pipeline each second
};

}  // namespace assay
