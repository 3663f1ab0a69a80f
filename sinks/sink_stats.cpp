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
  auto& c = writes_family.Add({{"sink", std::string(sink)}, {"result", ok ? "ok" : "error"}});
  if (!ok) errors_by_sink[std::string(sink)] = &c;
  return c;
}

prometheus::Counter& SinkStats::dropped(std::string_view sink) {
  auto& c = dropped_family.Add({{"sink", std::string(sink)}});
  dropped_by_sink[std::string(sink)] = &c;
  return c;
}

prometheus::Gauge& SinkStats::queueDepth(std::string_view sink) {
  return depth_family.Add({{"sink", std::string(sink)}});
}

SinkStats::Troubles SinkStats::troubles() const {
  Troubles t;
  std::map<std::string, std::string> by_sink;
  for (const auto& [sink, c] : errors_by_sink)
    if (const auto n = static_cast<long>(c->Value()); n > 0) {
      t.errors += n;
      by_sink[sink] = std::to_string(n) + " write error(s)";
    }
  for (const auto& [sink, c] : dropped_by_sink)
    if (const auto n = static_cast<long>(c->Value()); n > 0) {
      t.dropped += n;
      auto& text = by_sink[sink];
      text += (text.empty() ? "" : ", ") + std::to_string(n) + " skipped on a full queue";
    }
  for (const auto& [sink, text] : by_sink)
    t.text += (t.text.empty() ? "" : "; ") + sink + ": " + text;
  return t;
}

}  // namespace assay
