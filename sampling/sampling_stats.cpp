#include "sampling/sampling_stats.hpp"

namespace assay {

SamplingStats::SamplingStats(prometheus::Registry& registry, std::size_t max_label_values)
    : finished(prometheus::BuildCounter()
                   .Name("assay_events_finished_total")
                   .Help("Events-topic messages whose every terminal counter is counted: "
                         "replay-skipped, invalid, sampled out, dropped, or judged")
                   .Register(registry)
                   .Add({})),
      sampled_(prometheus::BuildCounter()
                   .Name("assay_events_sampled_total")
                   .Help("Events selected by hash sampling, by tenant")
                   .Register(registry)),
      dropped_(prometheus::BuildCounter()
                   .Name("assay_samples_dropped_total")
                   .Help("Sampled events dropped before judging, by reason")
                   .Register(registry)),
      tenants_(max_label_values),
      dropped_queue_full(dropped_.Add({{"reason", "queue_full"}})),
      dropped_shutdown(dropped_.Add({{"reason", "shutdown"}})),
      sampled_out(prometheus::BuildCounter()
                      .Name("assay_events_sampled_out_total")
                      .Help("Events that sampling did not admit")
                      .Register(registry)
                      .Add({})),
      queue_depth(prometheus::BuildGauge()
                      .Name("assay_queue_depth")
                      .Help("Sampled events waiting for a judge worker")
                      .Register(registry)
                      .Add({})),

      paused(prometheus::BuildGauge()
                 .Name("assay_consumer_paused")
                 .Help("1 while consumption is paused because the judge backlog is full "
                       "(limits.when_full: block)")
                 .Register(registry)
                 .Add({})),
      pauses(prometheus::BuildCounter()
                 .Name("assay_consumer_pauses_total")
                 .Help("Times consumption was paused because the judge backlog was full")
                 .Register(registry)
                 .Add({})) {}

void SamplingStats::countSampled(std::string_view tenant) {
  const std::string label = tenants_.fold(tenant);
  prometheus::Counter* c = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = by_tenant_.find(label);
    if (it == by_tenant_.end())
      it = by_tenant_.emplace(label, &sampled_.Add({{"tenant", label}})).first;
    c = it->second;
  }
  c->Increment();
}

double SamplingStats::sampledTotal() const {
  std::lock_guard lock(mu_);
  double n = 0;
  for (const auto& [tenant, c] : by_tenant_) n += c->Value();
  return n;
}

}  // namespace assay
