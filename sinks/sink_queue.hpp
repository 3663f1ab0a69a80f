#pragma once
/// A sink behind its own bounded queue and thread, which is how the sink contract (sink.hpp)
/// holds for every sink: the caller of write() (a judge worker, or the budget ledger's thread
/// that stores verdicts and settles money) only appends to the queue; the sink's thread writes.
///
/// When the queue holds `capacity` judgments (sinks.queue_capacity), sinks.when_full says:
///   block        the judgment is queued all the same and saturated() turns true, which the
///                pipeline's backlog reads as full: consumption pauses until the queue is back
///                under half its capacity. Nothing is lost; the overflow is bounded by what was
///                already being judged. The caller never waits.
///   drop_newest  the judgment is not written to this sink (counted in
///                assay_sink_dropped_total{sink}); its delivery token is let go at once, so the
///                event's offset moves on without this sink's copy.
/// assay_sink_queue_depth{sink} is what waits for the sink, the batch its thread holds included.
///
/// A write that never returns (a FIFO without reader, a hung network file system) cannot be
/// interrupted: flush() and the destructor wait for it within a bound, then say so; the
/// destructor then leaves the thread behind (its state is shared with it, never freed under
/// it) so that a stopping daemon still exits.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <chrono>
#include <memory>
#include <string>

#include "config/options.hpp"
#include "sinks/sink.hpp"
#include "sinks/sink_stats.hpp"

namespace assay {

/// One judgment as every sink receives it: serialised once, shared by the sinks' queues.
struct SinkRecord {
  Judgment judgment;
  std::string json;  ///< toJson(judgment)
};

class QueuedSink {
 public:
  /// How long the destructor waits for the thread to write what is queued and end (after
  /// shutdown's bounded flush: within the stop bound of daemon/main.cpp).
  static constexpr std::chrono::seconds kStopWait{2};

  QueuedSink(std::unique_ptr<Sink> sink, const SinksOptions& options, SinkStats& stats);
  /// Writes what is queued, then ends the thread; a thread still inside a write after
  /// kStopWait is left behind, logged.
  ~QueuedSink();
  QueuedSink(const QueuedSink&) = delete;
  QueuedSink& operator=(const QueuedSink&) = delete;

  std::string_view name() const;
  /// Appends the record; never blocks on the sink (only on the queue's mutex).
  void write(const std::shared_ptr<const SinkRecord>& record, const DeliveryToken& token);
  /// block: the queue is over its capacity (until it is back under half of it).
  bool saturated() const;
  /// Waits until everything queued is handed to the sink (tests, judgeQueued()).
  void drain();
  /// Waits at most `timeout` until everything queued is written, then flushes the sink
  /// (shutdown). Returns the judgments still unwritten (0: all written and flushed).
  std::size_t flush(std::chrono::milliseconds timeout);
  /// The sink reopens its output (SIGHUP: logrotate moved the file) once what is queued before
  /// is written: the judgments delivered before the reopen go to the old file.
  void reopen();
  /// Judgments waiting, and seconds since the sink last finished a write while some waited
  /// (0 when none waits): a sink stuck in a write (/healthz).
  std::pair<std::size_t, double> behind() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace assay
