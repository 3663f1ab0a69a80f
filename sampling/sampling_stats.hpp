#pragma once
/// The series of sampling and of the judge queue (docs/metrics.md), declared once here:
///   assay_events_sampled_total{tenant}          tenant folded (tracking.max_label_values)
///   assay_samples_dropped_total{reason}         queue_full (drop-newest), shutdown (drain
///                                               timed out)
///   assay_events_sampled_out_total              events sampling did not admit (by the key's
///                                               hash before parsing, or by a tenant or app
///                                               rule after)
///   assay_queue_depth                           sampled events waiting for a worker
///   assay_events_finished_total                 events-topic messages whose coverage is
///                                               complete: each counted in exactly one terminal
///                                               counter per judge (docs/metrics.md, "Coverage")
///   assay_consumer_paused                       1 while limits.when_full: block holds
///                                               consumption back (the judge backlog is full)
///   assay_consumer_pauses_total                 times it did

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "core/label_folder.hpp"

namespace assay {

class SamplingStats {
 public:
  /// Registers assay_events_finished_total first: build it before any other stats struct
  /// (docs/metrics.md, "Coverage": a scrape reads counters in registration order, and reading
  /// this one before every terminal counter means no scrape shows a positive gap).
  SamplingStats(prometheus::Registry& registry, std::size_t max_label_values);
  /// assay_events_finished_total: +1 once an event's terminal counters are all counted (after
  /// them). Thread-safe.
  prometheus::Counter& finished;
  /// assay_events_sampled_total{tenant} += 1. Thread-safe.
  void countSampled(std::string_view tenant);
  /// The sum over every tenant (for the exit summary).
  double sampledTotal() const;

 private:
  prometheus::Family<prometheus::Counter>& sampled_;
  prometheus::Family<prometheus::Counter>& dropped_;
  LabelFolder tenants_;
  mutable std::mutex mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> by_tenant_;

 public:
  prometheus::Counter& dropped_queue_full;
  prometheus::Counter& dropped_shutdown;
  prometheus::Counter& sampled_out;
  prometheus::Gauge& queue_depth;
  prometheus::Gauge& paused;
  prometheus::Counter& pauses;
};

}  // namespace assay
