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
      skipped_(prometheus::BuildCounter()
                   .Name("assay_judge_skipped_total")
                   .Help("Sampled events a judge did not run on: reason rate (its nested "
                         "sampling rate) or run_if (its condition did not hold)")
                   .Register(registry)),
      abandoned_(prometheus::BuildCounter()
                     .Name("assay_judge_abandoned_total")
                     .Help("Judge runs still outstanding when the process stopped: no verdict "
                           "(the event is redelivered)")
                     .Register(registry)),
      pending(prometheus::BuildGauge()
                  .Name("assay_judge_pending_events")
                  .Help("Sampled events whose asynchronous (LLM) verdicts are not all in yet")
                  .Register(registry)
                  .Add({})) {}

JudgeStats::Judge& JudgeStats::add(const std::string& name, const std::string& version,
                                   const JudgeInfo& info, std::span<const Outcome> outcomes) {
  std::lock_guard lock(mu_);  // a reload adds judges while workers count runs
  Judge& j = judges_.emplace_back();
  j.labels = {{"judge", name}};
  // A judge built without a version (tests) has no judge_version label rather than an empty
  // one (the same series to Prometheus, not to a text match).
  if (!version.empty()) j.labels["judge_version"] = version;
  j.criterion = info.criterion;
  const auto with = [&](std::initializer_list<std::pair<const std::string, std::string>> more) {
    prometheus::Labels l = j.labels;
    l.insert(more);
    return l;
  };
  for (Outcome o : {Outcome::kOk}) countable(j, o);
  for (Outcome o : outcomes) countable(j, o);
  j.score = &scores_.Add(with({{"criterion", info.criterion}}), info.buckets);
  j.latency = &latency_.Add(j.labels, kLatencyBuckets);
  j.stalled = &stalled_.Add(j.labels);
  j.skipped_rate = &skipped_.Add(with({{"reason", "rate"}}));
  j.skipped_run_if = &skipped_.Add(with({{"reason", "run_if"}}));
  j.skipped_not_configured = &skipped_.Add(with({{"reason", "not_configured"}}));
  j.abandoned = &abandoned_.Add(j.labels);
  return j;
}

prometheus::Counter* JudgeStats::countable(Judge& j, Outcome o) {  // mu_ held
  prometheus::Labels l = j.labels;
  l["criterion"] = j.criterion;
  l["outcome"] = std::string(outcomeName(o));
  prometheus::Counter* c = &runs_.Add(l);
  j.runs[static_cast<int>(o)].store(c);
  return c;
}

void JudgeStats::countRun(Judge& j, Outcome outcome) {
  auto& slot = j.runs[static_cast<int>(outcome)];
  prometheus::Counter* c = slot.load();
  if (!c) {
    std::lock_guard lock(mu_);
    c = slot.load();
    if (!c) c = countable(j, outcome);
  }
  c->Increment();
}

}  // namespace assay
