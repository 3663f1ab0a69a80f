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
                 .Add({})) {}

prometheus::Counter& SinkStats::writes(std::string_view sink, bool ok) {
  return writes_family.Add({{"sink", std::string(sink)}, {"result", ok ? "ok" : "error"}});
}

}  // namespace assay
