#pragma once
/// The sinks' series (docs/metrics.md): assay_sink_writes_total{sink, result="ok"|"error"},
/// assay_events_judged_total (judgments handed to every sink), assay_sink_dropped_total{sink}
/// and assay_sink_queue_depth{sink} (sinks/sink_queue.hpp).

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <string>
#include <string_view>

namespace assay {

struct SinkStats {
  explicit SinkStats(prometheus::Registry& registry);
  /// One sink's counter for one result; a sink takes both at construction.
  prometheus::Counter& writes(std::string_view sink, bool ok);
  /// assay_sink_dropped_total{sink}: judgments a full queue made the sink skip (drop_newest).
  prometheus::Counter& dropped(std::string_view sink);
  /// assay_sink_queue_depth{sink}: judgments waiting for the sink's thread.
  prometheus::Gauge& queueDepth(std::string_view sink);
  /// What the sinks failed to write: write errors and judgments skipped on a full queue, in
  /// all, and as text ("jsonl: 324 write error(s); kafka: 35 skipped on a full queue"; "" =
  /// none): the exit summary, assay backfill's exit code.
  struct Troubles {
    long errors = 0, dropped = 0;
    std::string text;
  };
  Troubles troubles() const;

  prometheus::Family<prometheus::Counter>& writes_family;
  prometheus::Counter& judged;
  prometheus::Family<prometheus::Counter>& dropped_family;
  std::map<std::string, prometheus::Counter*> dropped_by_sink;  ///< dropped()'s, by sink
  std::map<std::string, prometheus::Counter*> errors_by_sink;   ///< writes(sink, false)'s
  prometheus::Family<prometheus::Gauge>& depth_family;
};

}  // namespace assay
