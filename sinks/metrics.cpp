#include "sinks/metrics.hpp"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace assay {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Judge latency buckets, seconds: cheap judges take microseconds, LLM judges seconds.
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30};

prometheus::Family<prometheus::Counter>& counterFamily(prometheus::Registry& r, const char* name,
                                                       const char* help) {
  return BuildCounter().Name(name).Help(help).Register(r);
}

}  // namespace

std::string_view invalidReasonName(InvalidReason r) {
  switch (r) {
    case InvalidReason::kNotJson:
      return "not_json";
    case InvalidReason::kNotUtf8:
      return "not_utf8";
    case InvalidReason::kMissingField:
      return "missing_field";
    case InvalidReason::kWrongType:
      return "wrong_type";
    case InvalidReason::kTooLarge:
      return "too_large";
    case InvalidReason::kCount_:
      break;
  }
  return "unknown";
}


Metrics::Metrics(const std::string& topic, const std::vector<JudgeMetricSpec>& judges,
                 std::size_t max_label_values, const std::string& version)
    : registry_(std::make_shared<prometheus::Registry>()),
      dropped_family_(counterFamily(*registry_, "assay_samples_dropped_total",
                                    "Sampled events dropped before judging, by reason")),
      sampled_family_(counterFamily(*registry_, "assay_events_sampled_total",
                                    "Events selected by hash sampling, by tenant")),
      sink_family_(counterFamily(*registry_, "assay_sink_writes_total",
                                 "Judgments written by each sink, by result")),
      consumed(counterFamily(*registry_, "assay_events_consumed_total",
                             "Kafka messages consumed from the events topic")
                   .Add({{"topic", topic}})),
      dropped_queue_full(dropped_family_.Add({{"reason", "queue_full"}})),
      dropped_shutdown(dropped_family_.Add({{"reason", "shutdown"}})),
      dead_lettered(counterFamily(*registry_, "assay_events_dead_lettered_total",
                                  "Invalid messages copied to the dead-letter topic")
                        .Add({})),
      judged(counterFamily(*registry_, "assay_events_judged_total",
                           "Sampled events judged and handed to every sink")
                 .Add({})),
      queue_depth(BuildGauge()
                      .Name("assay_queue_depth")
                      .Help("Sampled events waiting for a judge worker")
                      .Register(*registry_)
                      .Add({})),
      tenants_(max_label_values) {
  auto& invalid_family = counterFamily(*registry_, "assay_events_invalid_total",
                                       "Messages that are not valid events, by reason");
  for (int i = 0; i < kInvalidReasonCount; ++i) {
    invalid[i] = &invalid_family.Add(
        {{"reason", std::string(invalidReasonName(static_cast<InvalidReason>(i)))}});
  }
  auto& runs = counterFamily(*registry_, "assay_judge_runs_total",
                             "Judge runs by outcome (ok = a score was produced)");
  runs_family_ = &runs;
  specs_ = judges;
  auto& scores = BuildHistogram()
                     .Name("assay_judge_score")
                     .Help("Scores of successful judge runs, on each judge's own scale")
                     .Register(*registry_);
  auto& latency = BuildHistogram()
                      .Name("assay_judge_latency_seconds")
                      .Help("Wall time of one judge run on one event")
                      .Register(*registry_);
  for (const auto& j : judges) {
    JudgeStats& s = judge.emplace_back();
    for (int o = 0; o < kOutcomeCount; ++o) {
      const auto outcome = static_cast<Outcome>(o);
      const bool llm_outcome = outcome >= Outcome::kSchemaError;
      const bool relevant = outcome == Outcome::kOk || outcome == Outcome::kNoContext ||
                            (j.llm ? llm_outcome : !llm_outcome);
      if (!relevant) continue;
      s.runs[o] = &runs.Add({{"judge", j.name},
                             {"criterion", j.criterion},
                             {"outcome", std::string(outcomeName(outcome))}});
    }
    s.score = &scores.Add({{"judge", j.name}, {"criterion", j.criterion}}, j.buckets);
    s.latency = &latency.Add({{"judge", j.name}}, kLatencyBuckets);
  }
  BuildGauge()
      .Name("assay_build_info")
      .Help("Always 1; the version label tells which assayd is running")
      .Register(*registry_)
      .Add({{"version", version}})
      .Set(1);
}

void Metrics::countSampled(std::string_view tenant) {
  const std::string label = tenants_.fold(tenant);
  prometheus::Counter* c = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = sampled_by_tenant_.find(label);
    if (it == sampled_by_tenant_.end())
      it = sampled_by_tenant_.emplace(label, &sampled_family_.Add({{"tenant", label}})).first;
    c = it->second;
  }
  c->Increment();
}

void Metrics::countRun(std::size_t i, Outcome outcome) {
  auto& slot = judge[i].runs[static_cast<int>(outcome)];
  prometheus::Counter* c = slot.load();
  if (!c) {
    std::lock_guard lock(mu_);
    c = slot.load();
    if (!c) {
      c = &runs_family_->Add({{"judge", specs_[i].name},
                              {"criterion", specs_[i].criterion},
                              {"outcome", std::string(outcomeName(outcome))}});
      slot.store(c);
    }
  }
  c->Increment();
}

prometheus::Counter& Metrics::sinkWrites(std::string_view sink, bool ok) {
  return sink_family_.Add({{"sink", std::string(sink)}, {"result", ok ? "ok" : "error"}});
}

std::string Metrics::serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace assay
