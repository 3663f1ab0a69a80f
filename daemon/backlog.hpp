#pragma once
/// The judge backlog's admission (limits.when_full, docs/configuration.md): a sample goes into
/// the bounded queue, or, when the backlog is full (a full queue, `pending_limit` events
/// waiting for an asynchronous verdict, or a sink behind by more than its queue):
///   drop_newest  it is dropped, counted in assay_events_dropped_total{reason="queue_full"};
///   block        it is held, in order, and consumption pauses (assay_consumer_paused) until
///                none is held and the backlog is down to half its capacity.
/// Poll thread only.

#include <cstddef>
#include <deque>
#include <functional>

#include "config/options.hpp"
#include "daemon/judge_runner.hpp"
#include "sampling/bounded_queue.hpp"
#include "sampling/sampling_stats.hpp"

namespace assay {

class Backlog {
 public:
  /// `pending` says how many events wait for an asynchronous verdict (JudgeRunner::pending);
  /// `sinks_behind` whether a sink's queue is over its capacity (Sinks::saturated), which
  /// counts as a full backlog too.
  Backlog(const LimitsOptions& limits, std::size_t pending_limit, BoundedQueue<WorkItem>& queue,
          SamplingStats& stats, std::function<int()> pending, std::function<bool()> sinks_behind);

  /// Queues `item`, or holds it (block). False when it was dropped (drop_newest, counted):
  /// `item` is left as it came, for its origin to be finished.
  bool admit(WorkItem& item);
  /// block: consumption is paused (no message is taken until resume() says otherwise).
  bool paused() const { return paused_; }
  /// block, while paused: moves held samples into the queue while there is room, and resumes
  /// once none is held and the backlog is down to half its capacity. True while still paused.
  bool resume();
  /// Samples held now.
  std::size_t held() const { return held_.size(); }
  /// Shutdown: forgets the held samples (their origins are not finished: redelivered).
  std::size_t dropHeld();

 private:
  bool full() const;

  const LimitsOptions& limits_;
  std::size_t pending_limit_;
  BoundedQueue<WorkItem>& queue_;
  SamplingStats& stats_;
  std::function<int()> pending_;
  std::function<bool()> sinks_behind_;
  std::deque<WorkItem> held_;  // block: samples consumed while the backlog was full
  bool paused_ = false;
};

}  // namespace assay
