#include "daemon/backlog.hpp"

namespace assay {

Backlog::Backlog(const LimitsOptions& limits, std::size_t pending_limit,
                 BoundedQueue<WorkItem>& queue, SamplingStats& stats, std::function<int()> pending,
                 std::function<bool()> sinks_behind)
    : limits_(limits),
      pending_limit_(pending_limit),
      queue_(queue),
      stats_(stats),
      pending_(std::move(pending)),
      sinks_behind_(std::move(sinks_behind)) {}

bool Backlog::admit(WorkItem& item) {
  if (limits_.when_full == LimitsOptions::WhenFull::kDropNewest) {
    if (!sinks_behind_() && queue_.tryPushDeferred(item)) return true;
    stats_.dropped_queue_full.Increment();  // a counted, deliberate drop
    return false;
  }
  // The poll's batch wakes the workers once at its end (Pipeline::pollOnce), or every
  // BoundedQueue::kWakeEvery events: not once per event.
  if (held_.empty() && !full() && queue_.tryPushDeferred(item)) return true;
  held_.push_back(std::move(item));  // judged later, in order; its origin stays pending
  if (!paused_) {
    paused_ = true;
    stats_.paused.Set(1);
    stats_.pauses.Increment();
  }
  return true;
}

bool Backlog::full() const {
  return queue_.size() >= limits_.queue_capacity ||
         static_cast<std::size_t>(pending_()) >= pending_limit_ || sinks_behind_();
}

bool Backlog::resume() {
  if (!paused_) return false;
  while (!held_.empty() && !full() && queue_.tryPush(held_.front())) held_.pop_front();
  if (held_.empty() && queue_.size() <= limits_.queue_capacity / 2 &&
      static_cast<std::size_t>(pending_()) <= pending_limit_ / 2 && !sinks_behind_()) {
    paused_ = false;
    stats_.paused.Set(0);
  }
  return paused_;
}

std::size_t Backlog::dropHeld() {
  const std::size_t n = held_.size();
  held_.clear();
  return n;
}

}  // namespace assay
