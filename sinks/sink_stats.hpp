#pragma once
/// The sinks' series (docs/metrics.md): assay_sink_writes_total{sink, result="ok"|"error"} and
/// assay_events_judged_total (judgments handed to every sink).

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <string_view>

namespace assay {

struct SinkStats {
  explicit SinkStats(prometheus::Registry& registry);
  /// One sink's counter for one result; a sink takes both at construction.
  prometheus::Counter& writes(std::string_view sink, bool ok);

  prometheus::Family<prometheus::Counter>& writes_family;
  prometheus::Counter& judged;
};

}  // namespace assay
