#pragma once
/// Options structs, one per top-level YAML section (CONTRACT.md §5). Plain data with defaults;
/// only config/loader.cpp knows YAML. Units are in the names (`_ms`, `_bytes`, `_eur`).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "judges/judge.hpp"
#include "judges/registry.hpp"
#include "sampling/sampler.hpp"

namespace assay {

struct KafkaOptions {
  std::string brokers = "embedded";  ///< "embedded" = in-process librdkafka mock cluster
  std::string topic = "rag.events";
  std::string group_id = "assayd";
  std::string feedback_topic;     ///< optional; empty = none
  std::string results_topic;      ///< optional; judged events are produced here, keyed by id
  std::string dead_letter_topic;  ///< optional; invalid messages are copied here
  int partitions = 6;             ///< embedded only: partitions of each topic it creates, 1..256
  /// Passed verbatim to librdkafka (consumer and producer), in file order.
  std::vector<std::pair<std::string, std::string>> properties;
};

/// Where each event field lives in the message: JSON Pointers (RFC 6901). "" = field not read.
struct EventFieldOptions {
  std::string id = "/id", timestamp = "/timestamp", tenant = "/tenant", app = "/app",
              variant = "/variant", model = "/model", question = "/question",
              contexts = "/contexts", answer = "/answer", reference = "/reference",
              relevant_context_ids = "/relevant_context_ids", expected_format = "/expected_format";
};

struct SamplingOptions {
  double rate = 0.05;  ///< [0, 1]
  std::vector<SamplingRule> rules;
};

struct LimitsOptions {
  std::size_t queue_capacity = 10000;     ///< sampled events waiting for a worker
  std::size_t max_event_bytes = 1048576;  ///< larger messages are invalid (`too_large`)
  int workers = 2;                        ///< judge worker threads, 1..64
  int drain_timeout_ms = 10000;           ///< on shutdown, time allowed to finish the queue
};

/// Accepted now so a production file validates; the LLM budget itself is issue #3's.
struct BudgetOptions {
  double usd_to_eur = 0.92;
  double daily_limit_eur = 5.0;
  double alert_ratio = 0.8;
  std::string timezone = "UTC";
  std::string store = "memory";
};

struct JudgeConfig {
  std::string name;  ///< unique; the `judge` metric label
  const JudgeFactory* factory = nullptr;
  double rate = 1.0;  ///< share of sampled events this judge sees, (0, 1]
  JudgeOptionValues values;
};

struct TrackingOptions {
  int window = 500;
  double leniency_max_ratio = 0.8;
  int max_label_values = 50;  ///< distinct tenant/app/variant label values before "other"
};

struct AdminOptions {
  std::string listen = "127.0.0.1:9464";  ///< host:port of /metrics, /healthz, /readyz
};

struct JsonlSinkOptions {
  std::string path;  ///< created (with parent folders) if missing; appended to
};

struct SinksOptions {
  bool jsonl_enabled = false;
  JsonlSinkOptions jsonl;
};

struct LogOptions {
  std::string level = "info";  ///< spdlog level: trace, debug, info, warning, error, critical, off
};

struct Config {
  std::string file;  ///< path it was loaded from
  KafkaOptions kafka;
  EventFieldOptions events;
  SamplingOptions sampling;
  LimitsOptions limits;
  BudgetOptions budget;
  std::vector<JudgeConfig> judges;
  TrackingOptions tracking;
  AdminOptions admin;
  SinksOptions sinks;
  LogOptions log;
};

}  // namespace assay
