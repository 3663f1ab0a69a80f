// Every subsystem declares its series once, in its own stats struct (consumer, sampling,
// judges, sinks; the LLM and budget structs in tests/llm): together on one registry they make
// an exposition that promtool accepts.
#include <doctest/doctest.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "daemon/consumer_stats.hpp"
#include "judges/judge_stats.hpp"
#include "judges/registry.hpp"
#include "sampling/sampling_stats.hpp"
#include "sinks/exposition.hpp"
#include "sinks/sink_stats.hpp"

using namespace assay;

namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

}  // namespace

TEST_CASE("stats structs: names, labels, and promtool check metrics accepts the exposition") {
  prometheus::Registry registry;
  ConsumerStats consumer(registry, {"rag.events", "rag.feedback"}, "9.9.9");
  SamplingStats sampling(registry, 1);
  JudgeStats judges(registry);
  SinkStats sinks(registry);
  const auto* rouge = findJudgeFactory(JudgeKind::kLexical, "rouge_l");
  JudgeInfo info = rouge->info({});
  info.buckets = {0.5, 1.0};
  auto& j = judges.add("rouge_l", info, rouge->descriptor->outcomes);
  consumer.consumed.Increment(3);
  consumer.invalid[static_cast<int>(InvalidReason::kNotUtf8)]->Increment();
  sampling.countSampled("acme");
  sampling.countSampled("globex");  // beyond max_label_values = 1 → other
  judges.countRun(j, Outcome::kOk);
  j.score->Observe(0.7);
  j.latency->Observe(0.0001);
  consumer.setLag({{"rag.events", 0, 7}, {"rag.events", 1, 0}});
  consumer.setTopic(1, 12.5, 3);
  consumer.replay_skipped.Increment(4);
  const std::string text = serializeMetrics(registry);
  CHECK(has(text, "assay_events_consumed_total{topic=\"rag.events\"} 3"));
  CHECK(has(text, "assay_events_invalid_total{reason=\"not_utf8\"} 1"));
  CHECK(has(text, "assay_events_invalid_total{reason=\"too_large\"} 0"));
  CHECK(has(text, "assay_events_sampled_total{tenant=\"acme\"} 1"));
  CHECK(has(text, "assay_events_sampled_total{tenant=\"other\"} 1"));
  CHECK(sampling.sampledTotal() == 2.0);
  CHECK(has(text,
            "assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "outcome=\"ok\"} 1"));
  CHECK(has(text,
            "assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "outcome=\"no_reference\"} 0"));
  CHECK(has(text,
            "assay_judge_score_bucket{criterion=\"answer_correctness\",judge=\"rouge_l\",le="
            "\"1\"} 1"));
  CHECK(has(text,
            "assay_judge_score_bucket{criterion=\"answer_correctness\",judge=\"rouge_l\",le="
            "\"0.5\"} 0"));
  CHECK(has(text, "assay_build_info{version=\"9.9.9\"} 1"));
  CHECK(has(text, "assay_consumer_lag_messages{partition=\"0\",topic=\"rag.events\"} 7"));
  CHECK(has(text, "assay_events_judged_total 0"));
  CHECK(has(text, "assay_consumer_last_message_age_seconds{topic=\"rag.feedback\"} 12.5"));
  CHECK(has(text, "assay_consumer_assigned_partitions{topic=\"rag.feedback\"} 3"));
  CHECK(has(text, "assay_consumer_assigned_partitions{topic=\"rag.events\"} 0"));
  CHECK(has(text, "assay_events_replay_skipped_total 4"));
  CHECK(has(text, "assay_kafka_authentication_failures_total 0"));
  // A local judge does not export an LLM judge's outcomes until one happens.
  CHECK_FALSE(has(text, "outcome=\"skipped_budget\""));
  judges.countRun(j, Outcome::kJudgeError);
  CHECK(has(serializeMetrics(registry),
            "assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "outcome=\"judge_error\"} 1"));
  CHECK(has(text, "assay_queue_depth 0"));
  CHECK(has(text, "assay_samples_dropped_total{reason=\"queue_full\"} 0"));
  // A partition no longer assigned loses its series.
  consumer.setLag({{"rag.events", 1, 2}});
  CHECK_FALSE(has(serializeMetrics(registry), "partition=\"0\""));
  const auto [invalid, detail] = consumer.invalidSummary();
  CHECK(invalid == 1);
  CHECK(detail == "not_utf8=1");

  const std::string path = "/tmp/assay_metrics_" + std::to_string(::getpid()) + ".prom";
  std::ofstream(path) << text;
  const int rc =
      std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::ifstream out(path + ".out");
  const std::string report((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  INFO("promtool said: " << report);
  CHECK(rc == 0);
  std::remove(path.c_str());
  std::remove((path + ".out").c_str());
}
