#pragma once
/// The explicit table of sink types (sinks/registry.cpp), built from config, and the set of
/// configured sinks the pipeline hands every judgment to.

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "core/yaml_reader.hpp"
#include "sinks/kafka_results_sink.hpp"
#include "sinks/sink.hpp"
#include "sinks/sink_queue.hpp"
#include "sinks/sink_stats.hpp"

namespace assay {

/// One row of the sink table (docs/adding-a-sink.md): its name (the `sink` label), whether
/// the configuration enables it, and how it is built. tests/sinks/sink_compliance_test walks
/// every row.
struct SinkRow {
  const char* name;
  bool (*enabled)(const SinksOptions&, const SinkContext&);
  std::unique_ptr<Sink> (*create)(const SinksOptions&, const SinkContext&);
  /// What start-up would refuse in the sink's options, checked without building it
  /// (--check-config; `file` is the configuration's path): errors at the options' FILE:LINE:COL.
  /// Null: nothing to check.
  void (*check)(const SinksOptions&, const std::string& file, std::vector<ConfigError>& errors);
};
/// Every sink type, in the order they are built.
std::span<const SinkRow> sinkTable();

/// Every configured sink's check (SinkRow::check), in table order.
std::vector<ConfigError> checkSinks(const SinksOptions& options, const std::string& file);

/// Builds every configured sink in table order. Throws std::runtime_error (start-up only).
std::vector<std::unique_ptr<Sink>> createSinks(const SinksOptions& options, const SinkContext& ctx);

/// Every configured sink, each behind its own queue and thread (sinks/sink_queue.hpp). A
/// judgment is serialised once (core/judgment.hpp) and queued to each; its delivery token is
/// released when the last sink lets go of it (sink.hpp).
class Sinks {
 public:
  /// Throws std::runtime_error naming the sink's key when one cannot be opened.
  Sinks(const SinksOptions& options, const SinkContext& ctx);
  /// These sinks, each behind its own queue under `options` (tests, and any caller that
  /// builds sinks itself).
  Sinks(std::vector<std::unique_ptr<Sink>> sinks, const SinksOptions& options, SinkStats& stats);
  /// Queues `j` to every sink and counts assay_events_judged_total; `token` (the event's
  /// offset) is finished once every sink is done with it. Never blocks on a sink, never throws.
  /// Any thread.
  void deliver(const Judgment& j, const DeliveryToken& token);
  /// Waits until every queue is handed to its sink (tests; the pipeline's judgeQueued()).
  void drain();
  /// Waits for every queue to be written, then pushes buffered data out (file: fsync; results
  /// topic: wait for acknowledgements). Waits at most `timeout` for each sink; a sink that did
  /// not write everything in time is logged with what it left (their offsets stay pending, so
  /// they are redelivered). Returns the judgments left unwritten.
  std::size_t flush(std::chrono::milliseconds timeout = std::chrono::hours(24));
  /// The sinks that have judgments waiting and finished no write for `after_s` seconds or
  /// more, as "sink 'jsonl' has written nothing for 75 s with 48 judgment(s) waiting; …"
  /// ("" = none): /healthz.
  std::string stuck(double after_s) const;
  /// Some sink's queue is over sinks.queue_capacity (when_full: block): the pipeline pauses
  /// consumption until it catches up.
  bool saturated() const;
  /// Reopens every sink's output by name (SIGHUP: logrotate).
  void reopen();
  bool empty() const { return sinks_.empty(); }

 private:
  SinkStats& stats_;
  std::vector<std::unique_ptr<QueuedSink>> sinks_;
};

}  // namespace assay
