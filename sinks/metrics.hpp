#pragma once
/// Every Prometheus series assayd exports for the pipeline (CONTRACT.md §7), declared once and
/// built at start-up. The hot path holds references to children and never looks up a family;
/// the only label values from events (tenant) go through a `LabelFolder`.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "judges/judge.hpp"
#include "sinks/label_folder.hpp"

namespace assay {

/// Why a Kafka message is not an event (`assay_events_invalid_total{reason}`).
enum class InvalidReason { kNotJson = 0, kNotUtf8, kMissingField, kWrongType, kTooLarge, kCount_ };
inline constexpr int kInvalidReasonCount = static_cast<int>(InvalidReason::kCount_);
std::string_view invalidReasonName(InvalidReason r);


/// Series of one configured judge; indexes of `runs` are `Outcome` values. Outcomes the
/// judge's kind can produce exist from the start (exported as 0); use Metrics::countRun.
struct JudgeStats {
  std::array<std::atomic<prometheus::Counter*>, kOutcomeCount> runs{};
  prometheus::Histogram* score = nullptr;
  prometheus::Histogram* latency = nullptr;  ///< seconds
};

struct JudgeMetricSpec {
  std::string name, criterion;
  std::vector<double> buckets;
  bool llm =
      false;  ///< decides which outcome series exist from the start (the others on first use)
};

class Metrics {
  // Declared first: the series below are children of these families (construction order).
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& dropped_family_;
  prometheus::Family<prometheus::Counter>& sampled_family_;
  prometheus::Family<prometheus::Counter>& sink_family_;

 public:
  /// `topic`: the consumed topic; `judges`: one entry per configured judge, in config order.
  Metrics(const std::string& topic, const std::vector<JudgeMetricSpec>& judges,
          std::size_t max_label_values, const std::string& version);

  /// Prometheus text exposition format 0.0.4 of every series.
  std::string serialize() const;
  prometheus::Registry& registry() { return *registry_; }

  prometheus::Counter& consumed;  ///< assay_events_consumed_total{topic}
  std::array<prometheus::Counter*, kInvalidReasonCount> invalid{};
  prometheus::Counter& dropped_queue_full;  ///< assay_samples_dropped_total{reason="queue_full"}
  prometheus::Counter& dropped_shutdown;    ///< {reason="shutdown"}: drain timed out
  prometheus::Counter& dead_lettered;       ///< assay_events_dead_lettered_total
  prometheus::Counter& judged;              ///< assay_events_judged_total
  prometheus::Gauge& queue_depth;           ///< assay_queue_depth
  std::deque<JudgeStats> judge;             ///< same order as the constructor's `judges`

  /// assay_events_sampled_total{tenant}, tenant folded.
  void countSampled(std::string_view tenant);
  /// assay_judge_runs_total{judge, criterion, outcome} += 1 (creates an unexpected outcome's
  /// series on first use).
  void countRun(std::size_t judge_index, Outcome outcome);
  /// assay_sink_writes_total{sink, result="ok"|"error"}.
  prometheus::Counter& sinkWrites(std::string_view sink, bool ok);

 private:
  LabelFolder tenants_;
  prometheus::Family<prometheus::Counter>* runs_family_ = nullptr;
  std::vector<JudgeMetricSpec> specs_;
  std::mutex mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> sampled_by_tenant_;
};

}  // namespace assay
