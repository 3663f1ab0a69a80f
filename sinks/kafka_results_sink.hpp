#pragma once
/// Produces every judgment to `kafka.results_topic`, keyed by event id, so downstream tools
/// and on-call engineers can read the examples behind a metric. The event's delivery token is
/// kept until the broker acknowledges the message (delivery report), so the event's offset is
/// stored only after its judgment is safely in Kafka.

#include <librdkafka/rdkafka.h>

#include "sinks/sink.hpp"
#include "sinks/sink_stats.hpp"

namespace assay {

class KafkaResultsSink final : public Sink {
 public:
  /// `producer` must outlive the sink and have `deliveryReport()` wired as its dr_msg_cb.
  KafkaResultsSink(rd_kafka_t* producer, std::string topic, SinkStats& stats);
  std::string_view name() const override { return "kafka"; }
  void write(const Judgment& j, const std::string& json, DeliveryToken token) override;
  void flush() override;

  /// Delivery-report handler for the shared producer: releases the token carried in the
  /// message's opaque, counting broker-side failures. Messages without opaque are ignored.
  static void deliveryReport(rd_kafka_t* rk, const rd_kafka_message_t* msg, void* conf_opaque);
  /// An opaque for another message of the same producer (a dead-letter copy, a review line):
  /// its delivery report increments `ok` or `errors` (both must outlive the producer); `what`
  /// (a literal) names the topic's role in the log when delivery fails.
  static void* deliveryOpaque(prometheus::Counter* ok, prometheus::Counter* errors,
                              const char* what = "dead-letter topic");
  /// Frees an opaque whose message was never queued, counting it in `errors`.
  static void dropOpaque(void* opaque);

 private:
  rd_kafka_t* producer_;
  std::string topic_;
  prometheus::Counter* ok_ = nullptr;
  prometheus::Counter* errors_ = nullptr;
};

/// Context used by the registry to build sinks (only the wiring knows the producer).
struct SinkContext {
  SinkStats* stats = nullptr;
  rd_kafka_t* producer = nullptr;  ///< may be null when no Kafka sink is configured
  std::string results_topic;       ///< empty = no results topic
};

}  // namespace assay
