#pragma once
/// Process and Kafka-client series (docs/metrics.md), refreshed by the poll thread:
///   process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
///   process_open_fds, process_max_fds, process_start_time_seconds
///       the Prometheus client libraries' standard process series (from /proc/self: stat and
///       fd, which the unit's ProcSubset=pid leaves visible; getrlimit(RLIMIT_NOFILE))
///   assay_kafka_broker_up{client, broker}            1 while librdkafka's state is UP
///   assay_kafka_broker_rtt_seconds{client, broker}   average request round trip
///   assay_kafka_fetch_queue_messages{topic}          fetched, not yet consumed (consumer)
///   assay_kafka_producer_queue_messages              produced, not yet acknowledged
/// The Kafka series come from librdkafka's statistics (STATISTICS.md of librdkafka), emitted
/// every `statistics.interval.ms` (assayd's default 15000; 0 turns them off).

#include <librdkafka/rdkafka.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace assay {

class ProcessStats {
 public:
  explicit ProcessStats(prometheus::Registry& registry);
  /// Reads /proc/self/stat and /proc/self/fd; a read that fails leaves the series as they were.
  void refresh();

 private:
  prometheus::Counter& cpu_;
  prometheus::Gauge &resident_, &virtual_, &open_fds_, &max_fds_;
  double cpu_seen_s_ = 0;
};

class KafkaClientStats {
 public:
  explicit KafkaClientStats(prometheus::Registry& registry);
  /// One statistics JSON document of librdkafka (the stats callback, any thread). `client` is
  /// "consumer" or "producer". A document that does not parse, or more than 64 brokers, is
  /// ignored (beyond the 64th); returns false when it did not parse.
  bool update(std::string_view json, const std::string& client);
  /// librdkafka's stats callback: `opaque` is this object; the handle's type names the client.
  static int statsCallback(rd_kafka_t* rk, char* json, std::size_t len, void* opaque);
  /// librdkafka said that no broker answers (its ALL_BROKERS_DOWN error): every
  /// assay_kafka_broker_up series reads 0 at once instead of at the next statistics document
  /// (up to statistics.interval.ms later). Any thread.
  void allBrokersDown();

 private:
  prometheus::Family<prometheus::Gauge>&broker_up_, &rtt_, &fetch_queue_;
  prometheus::Gauge& producer_queue_;
  std::mutex mu_;
  std::set<prometheus::Gauge*> up_gauges_;  // every assay_kafka_broker_up series, guarded by mu_
};

}  // namespace assay
