#pragma once
/// A Prometheus counter counted by one thread in batches: add() is a plain increment, flush()
/// adds what was counted since the last flush to the counter in one step. prometheus-cpp's
/// Counter::Increment is a compare-and-swap loop on an atomic double (about 25 instructions);
/// the poll thread counts every consumed message several times and flushes once per poll
/// batch, so a scrape sees those counters at most one batch late, never ahead.

#include <prometheus/counter.h>

#include <cstdint>

namespace assay {

class BatchedCounter {
 public:
  explicit BatchedCounter(prometheus::Counter& counter) : counter_(&counter) {}
  /// One more, counted at the next flush(). The owning thread only.
  void add() { ++pending_; }
  /// Adds the pending count to the counter. The owning thread only.
  void flush() {
    if (pending_ == 0) return;
    counter_->Increment(static_cast<double>(pending_));
    pending_ = 0;
  }

 private:
  prometheus::Counter* counter_;
  std::uint64_t pending_ = 0;
};

}  // namespace assay
