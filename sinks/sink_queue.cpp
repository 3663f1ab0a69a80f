#include "sinks/sink_queue.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace assay {

using Clock = std::chrono::steady_clock;

/// Shared by the object and its thread: a thread left behind in a stuck write keeps it alive.
struct QueuedSink::State {
  struct Item {
    std::shared_ptr<const SinkRecord> record;  ///< null: reopen the sink's output
    DeliveryToken token;
  };
  std::unique_ptr<Sink> sink;
  std::size_t capacity = 0;
  bool drop_when_full = false;
  prometheus::Counter* dropped = nullptr;
  prometheus::Gauge* depth = nullptr;
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<Item> items;
  std::size_t in_batch = 0;  // taken by the thread, not yet written
  bool stop = false, ended = false;
  Clock::time_point progress = Clock::now();  // the last write finished (or the queue emptied)
  std::atomic<bool> saturated{false};

  void setDepth() { depth->Set(static_cast<double>(items.size() + in_batch)); }  // mu held
  void run();
};

void QueuedSink::State::run() {
  std::deque<Item> batch;
  std::unique_lock lock(mu);
  for (;;) {
    wake.wait(lock, [&] { return stop || !items.empty(); });
    if (items.empty()) break;  // stop, and everything written
    batch.swap(items);
    in_batch = batch.size();
    lock.unlock();
    // In runs of at most Sink::kMaxBatch records, a reopen between them in its place.
    std::vector<Sink::Record> run;
    for (std::size_t i = 0; i < batch.size();) {
      std::size_t done = 1;
      if (!batch[i].record) {
        sink->reopen();
      } else {
        run.clear();
        for (std::size_t k = i; k < batch.size() && batch[k].record && run.size() < Sink::kMaxBatch;
             ++k)
          run.push_back(
              {&batch[k].record->judgment, &batch[k].record->json, std::move(batch[k].token)});
        sink->writeBatch(run);
        done = run.size();
        run.clear();  // the tokens a synchronous sink left
      }
      for (std::size_t k = i; k < i + done; ++k) batch[k].record.reset();
      i += done;
      lock.lock();
      in_batch -= done;
      progress = Clock::now();
      setDepth();
      lock.unlock();
    }
    batch.clear();
    lock.lock();
    if (items.size() <= capacity / 2) saturated.store(false, std::memory_order_relaxed);
    if (items.empty()) idle.notify_all();
  }
  ended = true;
  idle.notify_all();
}

QueuedSink::QueuedSink(std::unique_ptr<Sink> sink, const SinksOptions& options, SinkStats& stats)
    : state_(std::make_shared<State>()) {
  state_->capacity = options.queue_capacity;
  state_->drop_when_full = options.when_full == SinksOptions::WhenFull::kDropNewest;
  state_->dropped = &stats.dropped(sink->name());
  state_->depth = &stats.queueDepth(sink->name());
  state_->sink = std::move(sink);
  std::thread([s = state_] { s->run(); }).detach();  // ended: the destructor waits for it
}

QueuedSink::~QueuedSink() {
  std::unique_lock lock(state_->mu);
  state_->stop = true;
  state_->wake.notify_one();
  if (state_->idle.wait_for(lock, kStopWait, [&] { return state_->ended; })) return;
  spdlog::error(
      "sink '{}': stuck in a write for more than {} s with {} judgment(s) unwritten; left "
      "behind (their offsets were not committed: they are judged again after a restart)",
      state_->sink->name(), kStopWait.count(), state_->items.size() + state_->in_batch);
}

std::string_view QueuedSink::name() const { return state_->sink->name(); }

bool QueuedSink::saturated() const { return state_->saturated.load(std::memory_order_relaxed); }

void QueuedSink::write(const std::shared_ptr<const SinkRecord>& record,
                       const DeliveryToken& token) {
  auto& s = *state_;
  {
    std::lock_guard lock(s.mu);
    if (s.items.size() >= s.capacity) {
      if (s.drop_when_full) {
        s.dropped->Increment();
        return;  // the token copy is not kept: this sink no longer holds the offset
      }
      s.saturated.store(true, std::memory_order_relaxed);
    }
    if (s.items.empty() && s.in_batch == 0) s.progress = Clock::now();  // the wait starts now
    s.items.push_back({record, token});
    s.setDepth();
  }
  s.wake.notify_one();
}

void QueuedSink::reopen() {
  {
    std::lock_guard lock(state_->mu);
    state_->items.push_back({nullptr, nullptr});  // in order with the writes; never dropped
  }
  state_->wake.notify_one();
}

void QueuedSink::drain() {
  std::unique_lock lock(state_->mu);
  state_->idle.wait(lock, [&] { return state_->items.empty() && state_->in_batch == 0; });
}

std::size_t QueuedSink::flush(std::chrono::milliseconds timeout) {
  {
    std::unique_lock lock(state_->mu);
    if (!state_->idle.wait_for(lock, timeout,
                               [&] { return state_->items.empty() && state_->in_batch == 0; }))
      return state_->items.size() + state_->in_batch;
  }
  state_->sink->flush();
  return 0;
}

std::pair<std::size_t, double> QueuedSink::behind() const {
  std::lock_guard lock(state_->mu);
  const std::size_t waiting = state_->items.size() + state_->in_batch;
  if (waiting == 0) return {0, 0.0};
  return {waiting, std::chrono::duration<double>(Clock::now() - state_->progress).count()};
}

}  // namespace assay
