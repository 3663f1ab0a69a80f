#pragma once
/// Options structs, one per top-level YAML section (docs/configuration.md). Plain data with
/// defaults; only config/loader.cpp knows YAML. Units are in the names (`_ms`, `_bytes`, `_eur`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "judges/budget_options.hpp"
#include "judges/judge.hpp"
#include "judges/redaction.hpp"
#include "judges/registry.hpp"

namespace assay {

/// kafka.format: what a message of kafka.topic holds (docs/events.md). Each value is a row of
/// the input-format table (sources/format.cpp).
enum class EventFormat {
  kAssayJson,  ///< one event, JSON (the default)
  kOtlpJson,   ///< an OTLP ExportTraceServiceRequest, OTLP/JSON (the Collector's otlp_json)
  kOtlpProto,  ///< the same, protobuf (the Collector's Kafka exporter default, otlp_proto)
};
/// The kafka.format names, in the order of EventFormat (the loader reads them).
inline constexpr const char* kEventFormatNames[] = {"assay_json", "otlp_json", "otlp_proto"};
/// The formats that read OpenTelemetry traces (the `otlp:` section maps them; there is no event
/// message for `events:` or a rubric's JSON Pointer inputs).
inline constexpr bool readsTraces(EventFormat f) {
  return f == EventFormat::kOtlpJson || f == EventFormat::kOtlpProto;
}

struct KafkaOptions {
  std::string brokers = "embedded";  ///< "embedded" = in-process librdkafka mock cluster
  EventFormat format = EventFormat::kAssayJson;
  std::string topic = "rag.events";
  std::string group_id = "assayd";
  std::string feedback_topic;     ///< optional; empty = none
  std::string results_topic;      ///< optional; judged events are produced here, keyed by id
  std::string dead_letter_topic;  ///< optional; invalid messages are copied here
  int partitions = 6;             ///< embedded only: partitions of each topic it creates, 1..256
  /// Passed verbatim to librdkafka (consumer and producer), in file order.
  std::vector<std::pair<std::string, std::string>> properties;
  /// Where each property and the mapping are in the file (1-based; 0 = unknown), so that an
  /// error librdkafka reports later points at the line.
  struct Position {
    std::string key;
    int line = 0, column = 0;
  };
  std::vector<Position> property_positions;
  int properties_line = 0, properties_column = 0;
};

/// Where each event field lives in the message: JSON Pointers (RFC 6901). "" = field not read.
struct EventFieldOptions {
  std::string id = "/id", timestamp = "/timestamp", tenant = "/tenant", app = "/app",
              variant = "/variant", model = "/model", question = "/question",
              contexts = "/contexts", answer = "/answer", reference = "/reference",
              relevant_context_ids = "/relevant_context_ids", expected_format = "/expected_format";
  /// Further JSON Pointers whose values go to Event::fields: those the custom LLM rubrics name
  /// in `rubric.inputs` (gathered from the judges, not a configuration key).
  std::vector<std::string> extra;
};

/// otlp: RAG events assembled from OpenTelemetry traces (kafka.format otlp_json | otlp_proto;
/// sources/trace_join.hpp, docs/events.md).
struct OtlpOptions {
  /// The keys `otlp.attributes` may set (meanings: sources/trace_mapping.hpp, docs/events.md).
  static constexpr std::array<std::string_view, 14> kAttributeKeys = {
      "span_kind", "retrieval_kind",  "generation_kind", "query",
      "documents", "output_messages", "answer",          "input_messages",
      "model",     "fallback_model",  "tenant",          "app",
      "variant",   "reference"};
  std::string mapping = "openinference";  ///< built-in mapping: openinference | gen_ai
  /// Attribute names over the mapping's, key by key (sources/trace_mapping.hpp keys), in file
  /// order.
  std::vector<std::pair<std::string, std::string>> attributes;
  int join_timeout_ms = 30'000;  ///< a trace waits this long after its last span, 1..3,600,000
  /// A trace leaves the join this long after its first span whatever keeps arriving (a
  /// trickle of spans would otherwise hold its messages' offsets forever), ms,
  /// join_timeout_ms..86,400,000.
  int max_trace_age_ms = 300'000;
  std::size_t max_traces = 10'000;    ///< traces waiting at once, 1..10,000,000
  std::size_t max_bytes = 64u << 20;  ///< text they hold, bytes, 1 MiB..16 GiB
  bool judge_incomplete = true;       ///< incomplete: judge (true) | count (false)
};

/// A sampling rule: the first rule whose every given field equals the event's wins
/// (sampling/sampler.hpp applies them).
struct SamplingRule {
  std::string tenant;  ///< empty = any tenant
  std::string app;     ///< empty = any app
  double rate = 0;     ///< [0, 1]
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
  /// `when_full`: what a full queue (or queue_capacity events waiting for asynchronous
  /// verdicts) does to the next sample. kBlock pauses the assigned partitions of kafka.topic
  /// until the backlog halves (nothing dropped, lag grows); kDropNewest drops it (counted).
  enum class WhenFull { kBlock, kDropNewest };
  WhenFull when_full = WhenFull::kBlock;
};

/// Calls one asynchronous judge may queue locally (JudgeContext::max_waiting). With kBlock the
/// pipeline bounds the backlog itself (it pauses at queue_capacity events waiting for verdicts,
/// plus at most queue_capacity queued and 64 in the workers' hands), so a judge's own queue
/// never refuses a call; with kDropNewest a call beyond queue_capacity is refused
/// (`rate_limited`, "local backlog full").
inline std::size_t judgeBacklog(const LimitsOptions& o) {
  return o.when_full == LimitsOptions::WhenFull::kBlock ? 2 * o.queue_capacity + 64
                                                        : o.queue_capacity;
}

/// `run_if`: a judge runs only when every condition holds on an earlier verdict of the same
/// event (a verdict that has no score fails every condition).
struct RunIfCondition {
  std::string judge;            ///< name of an earlier judge in the list
  std::optional<double> below;  ///< score < below
  std::optional<double> above;  ///< score > above
  std::optional<bool> passed;   ///< a check's pass/fail
};

struct JudgeConfig {
  std::string name;                       ///< unique; the `judge` metric label
  const JudgeFactory* factory = nullptr;  ///< its type in the judge table (never null once loaded)
  double rate = 1.0;                      ///< share of sampled events this judge sees, (0, 1]
  JudgeOptionValues values;               ///< the type's own options, type-checked
  std::vector<RunIfCondition> run_if;
  /// Where the judge and each of its keys are in the file (1-based line, column), so that an
  /// error found only when the daemon builds the judge still names FILE:LINE:COLUMN.
  std::pair<int, int> position{0, 0};
  std::map<std::string, std::pair<int, int>, std::less<>> key_positions;
  /// Its version (judgeVersionOf), shared by every judgment it writes; set by the loader.
  std::shared_ptr<const JudgeVersion> version{};
};

/// Score tracking per judge × criterion (tracking/window.hpp, tracking/tracker.hpp).
struct TrackingOptions {
  int window = 500;                 ///< last successful scores kept for the distribution
  int window_seconds = 86400;       ///< and only those younger than this (0 = no time bound)
  int join_capacity = 100000;       ///< events remembered to join judges' scores and feedback
  double leniency_max_ratio = 0.8;  ///< lenient when the top-score share exceeds it
  int min_samples = 100;            ///< fewer scores: no leniency verdict
  int min_pairs = 30;               ///< fewer pairs: no agreement, human Spearman or kappa
  int min_interval_n = 5;           ///< fewer scores of a variant: no 95 % interval, no overlap
  int baseline_window = 200;        ///< drift: scores in the baseline (the first ones, frozen)
  int recent_window = 100;          ///< drift: the most recent scores compared with it
  /// > 0: the window is a duration (YAML "6h", "7d"…) instead of a count: seconds.
  double baseline_seconds = 0, recent_seconds = 0;
  double drift_alpha = 0.01;      ///< Mann–Whitney p-value threshold
  double drift_min_delta = 0.25;  ///< and the means must move at least this much
  bool rolling_baseline = false;  ///< true: the baseline rolls just before the recent window
  std::string baseline_file;      ///< judgments JSON Lines whose scores freeze the baseline
  int baseline_file_line = 0, baseline_file_column = 0;  ///< where the key is (error messages)
  std::string baseline_from, baseline_until;  ///< RFC 3339: only judgments judged in [from, until)
  int max_label_values = 50;  ///< distinct tenant/app/variant label values before "other"
};

/// `canary:` (docs/canary.md): a fixed set of labelled events replayed through every judge on a
/// schedule, to catch a judge whose scores move while its configuration does not (a provider
/// changing weights under the same model name).
struct CanaryOptions {
  std::string file;  ///< JSON Lines events in the event format, with human labels; "" = none
  int file_line = 0, file_column = 0;  ///< where the key is (error messages)
  double every_seconds = 6 * 3600;     ///< a run every this many seconds, [60, 7 days]
  int sample = 200;                    ///< events per run, the same ones each run, [1, 10000]
  /// JSON Pointer of the human label in each line: a boolean (true = the answer is bad, e.g.
  /// hallucinated: ROC AUC of a low score for it) or a number on the judge's scale or any scale
  /// (Spearman, Kendall tau-b; Cohen's kappa when integer labels lie on the judge's scale).
  std::string label = "/labels/hallucinated";
  /// Where each judge version's first run is kept (JSON), so that a restart compares with it
  /// and not with itself; "" = in memory (a restart takes a new first run, logged).
  std::string state_file;
  /// The judges a run calls, by name (configured judges); empty = every judge.
  std::vector<std::string> judges;
};

/// `review:` (docs/review.md): judgments a human should look at, written to a review file: the
/// verdicts of a judge below its threshold, plus a random share of its other scored verdicts.
struct ReviewOptions {
  std::string path;   ///< JSON Lines review file (appended); "" = none
  std::string topic;  ///< Kafka topic the review lines are produced to; "" = none
  struct Judge {
    std::string name;
    double below = 0;  ///< route a score below this (the judge's scale)
  };
  std::vector<Judge> judges;
  double share = 0.02;     ///< and this share of the judge's other scored verdicts, [0, 1]
  int max_per_hour = 100;  ///< routed events per judge and clock hour, [1, 1000000]
};

struct AdminOptions {
  std::string listen = "127.0.0.1:10464";  ///< host:port of /metrics, /healthz, /readyz
  int listen_line = 0, listen_column = 0;  ///< where the key is (error messages; 0 = default)
};

struct JsonlSinkOptions {
  std::string path;                    ///< created (with parent folders) if missing; appended to
  int path_line = 0, path_column = 0;  ///< where the key is (error messages)
};

/// `sinks:` (docs/configuration.md). Every sink writes from its own thread, behind its own
/// bounded queue (sinks/sink_queue.hpp).
struct SinksOptions {
  bool jsonl_enabled = false;
  JsonlSinkOptions jsonl;
  /// Judgments each sink's queue holds before `when_full` applies, 1..1,000,000.
  std::size_t queue_capacity = 10'000;
  /// block: consumption pauses until the sink catches up (nothing lost); drop_newest: the sink
  /// skips the judgment (counted in assay_sink_dropped_total{sink}).
  enum class WhenFull { kBlock, kDropNewest };
  WhenFull when_full = WhenFull::kBlock;
};

struct LogOptions {
  std::string level = "info";  ///< spdlog level: trace, debug, info, warning, error, critical, off
  /// "text": one line per record; with stderr connected to the journal (JOURNAL_STREAM set by
  /// systemd), without the time (journald adds it) and with the sd-daemon(3) priority prefix
  /// "<N>" so that `journalctl -p warning` works. "json": one JSON object per line
  /// ({"ts", "level", "msg"}), for log shippers.
  std::string format = "text";
};

/// One experiment of the A/B router (docs/ab.md): its arms and their split.
struct AbExperiment {
  std::string name;
  std::vector<std::string> arms;  ///< 2..8, in configuration order
  std::vector<double> weights;    ///< relative shares (> 0), one per arm
};

/// `ab:` (docs/ab.md): the router's experiments, the decision rule and the assignment cache.
/// The tables live in `budget.store` under `budget.key_prefix` (shared by every instance on a
/// Redis; per process with `memory`).
struct AbOptions {
  std::vector<AbExperiment> experiments;
  /// "anytime": the anytime-valid sequential test (tracking/sequential.hpp) decides;
  /// "chi_square": the seed's rule, Pearson's chi-square test at every look (a peeking test).
  std::string decision = "anytime";
  double alpha = 0.05;           ///< the decision's level
  int min_ratings_per_arm = 30;  ///< no decision before every arm has this many ratings
  double assignment_ttl_s = 30;  ///< how long the router's assignment of a unit is cached
};

struct Config {
  std::string file;  ///< path it was loaded from
  std::string text;  ///< the file's text as loaded (a SIGHUP reload diffs against it)
  KafkaOptions kafka;
  EventFieldOptions events;
  OtlpOptions otlp;
  SamplingOptions sampling;
  /// redact: personal data and secrets replaced before any LLM call (judges/redaction.hpp).
  RedactOptions redact;
  LimitsOptions limits;
  BudgetOptions budget;
  std::vector<JudgeConfig> judges;
  TrackingOptions tracking;
  CanaryOptions canary;
  ReviewOptions review;
  AbOptions ab;
  AdminOptions admin;
  SinksOptions sinks;
  LogOptions log;
};

}  // namespace assay
