#pragma once
/// The Kafka source's series (docs/metrics.md), declared once here:
///   assay_events_consumed_total{topic}               messages consumed from the events topic
///   assay_events_invalid_total{reason}               messages that are not events (parser)
///   assay_events_dead_lettered_total                 invalid messages copied to the DLQ
///   assay_events_dead_letter_errors_total            copies the DLQ did not take
///   assay_consumer_lag_messages{topic, partition}    per assigned partition
///   assay_kafka_brokers_reachable                    0 while no broker answers, else 1
///   assay_kafka_authentication_failures_total        SASL/SSL authentication failures
///   assay_kafka_fetch_wakeups_total                  fetchers woken after half of the
///                                                    pre-fetch queue was consumed (kafka.cpp)
///   assay_events_replay_skipped_total                redelivered messages finished before
///   assay_consumer_last_message_age_seconds{topic}   since the last message consumed (s)
///   assay_consumer_assigned_partitions{topic}        partitions assigned to this instance
///   assay_feedback_copartitioned                     1 when feedback of this instance's events
///                                                    reaches it (co-partitioned), else 0
///   assay_build_info{version}                        always 1

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sources/event_parser.hpp"
#include "sources/kafka.hpp"

namespace assay {

class ConsumerStats {
 public:
  /// `topics`: the events topic first, then the feedback topic if any (per-topic gauges).
  ConsumerStats(prometheus::Registry& registry, const std::vector<std::string>& topics,
                const std::string& version);
  /// Sets the lag gauges to `lag`; partitions no longer assigned lose their series. Called by
  /// the poll thread only.
  void setLag(const std::vector<KafkaConsumer::Lag>& lag);
  /// Per topic of the constructor's list: seconds since its last message (since start before
  /// the first), and partitions assigned. Poll thread only.
  void setTopic(std::size_t topic, double last_message_age_s, std::size_t assigned_partitions);
  /// The sum over every reason, and "reason=n …" for the non-zero ones (exit summary).
  std::pair<long, std::string> invalidSummary() const;

  prometheus::Counter& consumed;
  std::array<prometheus::Counter*, kInvalidReasonCount> invalid{};
  prometheus::Counter& dead_lettered;
  prometheus::Counter& dead_letter_errors;
  prometheus::Gauge& brokers_reachable;
  prometheus::Counter& authentication_failures;
  prometheus::Counter& fetch_wakeups;  ///< KafkaConsumer::fetchNudges(), once a second
  prometheus::Counter& replay_skipped;
  prometheus::Gauge& feedback_copartitioned;  ///< set by the pipeline after each rebalance

 private:
  prometheus::Family<prometheus::Gauge>& lag_;
  std::map<std::pair<std::string, std::int32_t>, prometheus::Gauge*> lag_gauges_;
  std::vector<prometheus::Gauge*> age_, assigned_;
};

}  // namespace assay
