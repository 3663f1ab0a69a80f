#include "sources/consumer_stats.hpp"

#include <fmt/format.h>

namespace assay {
namespace {

prometheus::Family<prometheus::Counter>& counter(prometheus::Registry& r, const char* name,
                                                 const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

}  // namespace

ConsumerStats::ConsumerStats(prometheus::Registry& r, const std::vector<std::string>& topics,
                             const std::string& version)
    : consumed(
          counter(r, "assay_events_consumed_total", "Kafka messages consumed from the events topic")
              .Add({{"topic", topics.at(0)}})),
      dead_lettered(counter(r, "assay_events_dead_lettered_total",
                            "Invalid messages copied to the dead-letter topic (acknowledged)")
                        .Add({})),
      dead_letter_errors(counter(r, "assay_events_dead_letter_errors_total",
                                 "Invalid messages whose copy the dead-letter topic did not take")
                             .Add({})),
      brokers_reachable(prometheus::BuildGauge()
                            .Name("assay_kafka_brokers_reachable")
                            .Help("0 while no Kafka broker answers (librdkafka: all brokers "
                                  "down), else 1")
                            .Register(r)
                            .Add({})),
      authentication_failures(
          counter(r, "assay_kafka_authentication_failures_total",
                  "Kafka SASL or SSL authentication failures (librdkafka's error callback)")
              .Add({})),
      fetch_wakeups(counter(r, "assay_kafka_fetch_wakeups_total",
                            "Times librdkafka's fetchers were woken (a ListOffsets request to "
                            "each leader) after half its pre-fetch queue was consumed")
                        .Add({})),
      replay_skipped(counter(r, "assay_events_replay_skipped_total",
                             "Messages redelivered after a restart or rebalance that were finished "
                             "before (commit metadata): skipped, not judged or written again")
                         .Add({})),
      feedback_copartitioned(
          prometheus::BuildGauge()
              .Name("assay_feedback_copartitioned")
              .Help("1 when this instance holds, for each events partition it consumes, the "
                    "feedback partition of the same number (equal partition counts) or every "
                    "partition of both topics: the feedback of the events it judges reaches it; "
                    "0 when not (feedback is joined only on the instance that judged its event)")
              .Register(r)
              .Add({})),
      lag_(prometheus::BuildGauge()
               .Name("assay_consumer_lag_messages")
               .Help("Messages not yet consumed per assigned partition (high watermark minus "
                     "position)")
               .Register(r)) {
  auto& invalid_family =
      counter(r, "assay_events_invalid_total", "Messages that are not valid events, by reason");
  for (int i = 0; i < kInvalidReasonCount; ++i)
    invalid[i] = &invalid_family.Add(
        {{"reason", std::string(invalidReasonName(static_cast<InvalidReason>(i)))}});
  prometheus::BuildGauge()
      .Name("assay_build_info")
      .Help("Always 1; the version label tells which assayd is running")
      .Register(r)
      .Add({{"version", version}})
      .Set(1);
  brokers_reachable.Set(1);
  feedback_copartitioned.Set(1);
  auto& age = prometheus::BuildGauge()
                  .Name("assay_consumer_last_message_age_seconds")
                  .Help(
                      "Seconds since this instance last consumed a message from the topic "
                      "(since start before the first)")
                  .Register(r);
  auto& assigned = prometheus::BuildGauge()
                       .Name("assay_consumer_assigned_partitions")
                       .Help("Partitions of the topic assigned to this instance")
                       .Register(r);
  for (const auto& t : topics) {
    age_.push_back(&age.Add({{"topic", t}}));
    assigned_.push_back(&assigned.Add({{"topic", t}}));
  }
}

void ConsumerStats::setTopic(std::size_t topic, double last_message_age_s,
                             std::size_t assigned_partitions) {
  if (topic >= age_.size()) return;
  age_[topic]->Set(last_message_age_s);
  assigned_[topic]->Set(static_cast<double>(assigned_partitions));
}

void ConsumerStats::setLag(const std::vector<KafkaConsumer::Lag>& lag) {
  std::map<std::pair<std::string, std::int32_t>, prometheus::Gauge*> now;
  for (const auto& l : lag) {
    const auto k = std::make_pair(l.topic, l.partition);
    auto it = lag_gauges_.find(k);
    prometheus::Gauge* g =
        it != lag_gauges_.end()
            ? it->second
            : &lag_.Add({{"topic", l.topic}, {"partition", std::to_string(l.partition)}});
    g->Set(static_cast<double>(l.messages));
    now[k] = g;
    if (it != lag_gauges_.end()) lag_gauges_.erase(it);
  }
  for (auto& [k, g] : lag_gauges_) lag_.Remove(g);  // partitions no longer assigned
  lag_gauges_ = std::move(now);
}

std::pair<long, std::string> ConsumerStats::invalidSummary() const {
  long total = 0;
  std::string detail;
  for (int i = 0; i < kInvalidReasonCount; ++i) {
    const auto n = static_cast<long>(invalid[i]->Value());
    total += n;
    if (n)
      detail += fmt::format("{}{}={}", detail.empty() ? "" : " ",
                            invalidReasonName(static_cast<InvalidReason>(i)), n);
  }
  return {total, detail};
}

}  // namespace assay
