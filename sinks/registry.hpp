#pragma once
/// The explicit table of sink types (sinks/registry.cpp), built from config, and the set of
/// configured sinks the pipeline hands every judgment to.

#include <memory>
#include <vector>

#include "config/options.hpp"
#include "sinks/kafka_results_sink.hpp"
#include "sinks/sink.hpp"
#include "sinks/sink_stats.hpp"

namespace assay {

/// Builds every configured sink in table order. Throws std::runtime_error (start-up only).
std::vector<std::unique_ptr<Sink>> createSinks(const SinksOptions& options, const SinkContext& ctx);

/// Every configured sink. A judgment is serialised once (sinks/judgment.hpp) and written to
/// each; its delivery token is released when the last sink lets go of it (sink.hpp).
class Sinks {
 public:
  /// Throws std::runtime_error naming the sink's key when one cannot be opened.
  Sinks(const SinksOptions& options, const SinkContext& ctx);
  /// Writes `j` to every sink and counts assay_events_judged_total; `token` (the event's
  /// offset) is finished once every sink is done with it. Never throws.
  void deliver(const Judgment& j, const DeliveryToken& token);
  /// Pushes buffered data out (file: fsync; results topic: wait for acknowledgements).
  void flush();
  /// Reopens every sink's output by name (SIGHUP: logrotate).
  void reopen();
  bool empty() const { return sinks_.empty(); }

 private:
  SinkStats& stats_;
  std::vector<std::unique_ptr<Sink>> sinks_;
};

}  // namespace assay
