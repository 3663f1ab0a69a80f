#include "sinks/sink_queue.hpp"

namespace assay {

QueuedSink::QueuedSink(std::unique_ptr<Sink> sink, const SinksOptions& options, SinkStats& stats)
    : sink_(std::move(sink)),
      capacity_(options.queue_capacity),
      drop_when_full_(options.when_full == SinksOptions::WhenFull::kDropNewest),
      dropped_(stats.dropped(sink_->name())),
      depth_(stats.queueDepth(sink_->name())),
      thread_([this] { run(); }) {}

QueuedSink::~QueuedSink() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void QueuedSink::write(const std::shared_ptr<const SinkRecord>& record,
                       const DeliveryToken& token) {
  {
    std::lock_guard lock(mu_);
    if (items_.size() >= capacity_) {
      if (drop_when_full_) {
        dropped_.Increment();
        return;  // the token copy is not kept: this sink no longer holds the offset
      }
      saturated_.store(true, std::memory_order_relaxed);
    }
    items_.push_back({record, token});
    depth_.Set(static_cast<double>(items_.size()));
  }
  wake_.notify_one();
}

void QueuedSink::reopen() {
  {
    std::lock_guard lock(mu_);
    items_.push_back({nullptr, nullptr});  // in order with the writes; never dropped
  }
  wake_.notify_one();
}

void QueuedSink::run() {
  std::deque<Item> batch;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !items_.empty(); });
    if (items_.empty()) return;  // stop_, and everything written
    batch.swap(items_);
    writing_ = true;
    depth_.Set(0);
    lock.unlock();
    for (auto& item : batch) {
      if (!item.record) {
        sink_->reopen();
        continue;
      }
      sink_->write(item.record->judgment, item.record->json, std::move(item.token));
      item.record.reset();
    }
    batch.clear();
    lock.lock();
    writing_ = false;
    if (items_.size() <= capacity_ / 2) saturated_.store(false, std::memory_order_relaxed);
    if (items_.empty()) idle_.notify_all();
  }
}

void QueuedSink::drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return items_.empty() && !writing_; });
}

void QueuedSink::flush() {
  drain();
  sink_->flush();
}

}  // namespace assay
