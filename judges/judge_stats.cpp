#include "judges/judge_stats.hpp"

namespace assay {
namespace {

// Judge latency buckets, seconds: local judges take microseconds, LLM judges seconds.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30};

}  // namespace

JudgeStats::JudgeStats(prometheus::Registry& registry)
    : runs_(prometheus::BuildCounter()
                .Name("assay_judge_runs_total")
                .Help("Judge runs by outcome (ok = a score was produced)")
                .Register(registry)),
      scores_(prometheus::BuildHistogram()
                  .Name("assay_judge_score")
                  .Help("Scores of successful judge runs, on each judge's own scale")
                  .Register(registry)),
      latency_(prometheus::BuildHistogram()
                   .Name("assay_judge_latency_seconds")
                   .Help("Wall time of one judge run on one event")
                   .Register(registry)),
      stalled_(prometheus::BuildGauge()
                   .Name("assay_judge_stalled")
                   .Help("1 while an asynchronous judge has runs outstanding and has delivered "
                         "no verdict for longer than it may when it works, else 0")
                   .Register(registry)),
      pending(prometheus::BuildGauge()
                  .Name("assay_judge_pending_events")
                  .Help("Sampled events whose asynchronous (LLM) verdicts are not all in yet")
                  .Register(registry)
                  .Add({})) {}

JudgeStats::Judge& JudgeStats::add(const std::string& name, const JudgeInfo& info,
                                   std::span<const Outcome> outcomes) {
  std::lock_guard lock(mu_);  // a reload adds judges while workers count runs
  Judge& j = judges_.emplace_back();
  j.name = name;
  j.criterion = info.criterion;
  auto add = [&](Outcome o) {
    j.runs[static_cast<int>(o)] = &runs_.Add(
        {{"judge", name}, {"criterion", info.criterion}, {"outcome", std::string(outcomeName(o))}});
  };
  add(Outcome::kOk);
  for (Outcome o : outcomes) add(o);
  j.score = &scores_.Add({{"judge", name}, {"criterion", info.criterion}}, info.buckets);
  j.latency = &latency_.Add({{"judge", name}}, kLatencyBuckets);
  j.stalled = &stalled_.Add({{"judge", name}});
  return j;
}

void JudgeStats::countRun(Judge& j, Outcome outcome) {
  auto& slot = j.runs[static_cast<int>(outcome)];
  prometheus::Counter* c = slot.load();
  if (!c) {
    std::lock_guard lock(mu_);
    c = slot.load();
    if (!c) {
      c = &runs_.Add({{"judge", j.name},
                      {"criterion", j.criterion},
                      {"outcome", std::string(outcomeName(outcome))}});
      slot.store(c);
    }
  }
  c->Increment();
}

}  // namespace assay
