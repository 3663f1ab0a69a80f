#include "sinks/sink_stats.hpp"

#include <string>

namespace assay {

SinkStats::SinkStats(prometheus::Registry& registry)
    : writes_family(prometheus::BuildCounter()
                        .Name("assay_sink_writes_total")
                        .Help("Judgments written by each sink, by result")
                        .Register(registry)),
      judged(prometheus::BuildCounter()
                 .Name("assay_events_judged_total")
                 .Help("Sampled events judged and handed to every sink")
                 .Register(registry)
                 .Add({})),
      dropped_family(prometheus::BuildCounter()
                         .Name("assay_sink_dropped_total")
                         .Help("Judgments a sink skipped because its queue was full "
                               "(sinks.when_full: drop_newest)")
                         .Register(registry)),
      depth_family(prometheus::BuildGauge()
                       .Name("assay_sink_queue_depth")
                       .Help("Judgments waiting in a sink's queue for its thread")
                       .Register(registry)) {}

prometheus::Counter& SinkStats::writes(std::string_view sink, bool ok) {
  return writes_family.Add({{"sink", std::string(sink)}, {"result", ok ? "ok" : "error"}});
}

prometheus::Counter& SinkStats::dropped(std::string_view sink) {
  auto& c = dropped_family.Add({{"sink", std::string(sink)}});
  dropped_by_sink[std::string(sink)] = &c;
  return c;
}

std::string SinkStats::droppedSummary() const {
  std::string out;
  for (const auto& [sink, c] : dropped_by_sink)
    if (const auto n = static_cast<long>(c->Value()); n > 0)
      out += (out.empty() ? "" : ", ") + sink + " " + std::to_string(n);
  return out;
}

prometheus::Gauge& SinkStats::queueDepth(std::string_view sink) {
  return depth_family.Add({{"sink", std::string(sink)}});
}

}  // namespace assay
