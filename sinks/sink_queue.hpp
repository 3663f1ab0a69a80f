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
/// assay_sink_queue_depth{sink} is the queue's length.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

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
  QueuedSink(std::unique_ptr<Sink> sink, const SinksOptions& options, SinkStats& stats);
  /// Drains what is queued (writes it), then stops the thread.
  ~QueuedSink();
  QueuedSink(const QueuedSink&) = delete;
  QueuedSink& operator=(const QueuedSink&) = delete;

  std::string_view name() const { return sink_->name(); }
  /// Appends the record; never blocks on the sink (only on the queue's mutex).
  void write(const std::shared_ptr<const SinkRecord>& record, const DeliveryToken& token);
  /// block: the queue is over its capacity (until it is back under half of it).
  bool saturated() const { return saturated_.load(std::memory_order_relaxed); }
  /// Waits until everything queued is handed to the sink (tests, judgeQueued()).
  void drain();
  /// drain(), then flushes the sink (shutdown).
  void flush();
  /// The sink reopens its output (SIGHUP: logrotate moved the file) once what is queued before
  /// is written: the judgments delivered before the reopen go to the old file.
  void reopen();

 private:
  void run();

  struct Item {
    std::shared_ptr<const SinkRecord> record;  ///< null: reopen the sink's output
    DeliveryToken token;
  };
  std::unique_ptr<Sink> sink_;
  const std::size_t capacity_;
  const bool drop_when_full_;
  prometheus::Counter& dropped_;
  prometheus::Gauge& depth_;
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Item> items_;
  bool writing_ = false, stop_ = false;
  std::atomic<bool> saturated_{false};
  std::thread thread_;  // last: started once the members it reads exist
};

}  // namespace assay
