#pragma once
/// Where events come from, and the one way they flow out of it (docs/ARCHITECTURE.md):
///
///   Source ──poll──► Downstream (the pipeline: sampler → queue → runner → sinks)
///     ▲                   │
///     └──── finish(origin), from any thread, once the event is judged and written or dropped
///
/// A source reads messages, turns them into events through its input format
/// (sources/format.hpp), and hands each to its Downstream, which keeps it (and finishes its
/// origin later) or refuses it (finished at once). A source tracks which messages are finished
/// and moves its committed position over them only; it never judges, samples or writes.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/event.hpp"
#include "sampling/sampler.hpp"
#include "sources/offset_tracker.hpp"

namespace assay {

/// Where an event came from: one message (partition, offset), or, for a joined format, every
/// message that held one of its parts (`messages`; partition and offset are then unused).
struct Origin {
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::vector<MessageRef> messages;
};

/// What a source hands its events and feedback to (the pipeline). Poll thread only.
class Downstream {
 public:
  virtual ~Downstream() = default;
  /// The sampler's first step on a message key or an event id (Sampler::screen).
  virtual KeyScreen screen(std::string_view key_or_id) = 0;
  /// An event: true when it is kept (the source's finish(origin) is called once it is judged
  /// and written, or dropped; it may take `origin`'s content), false when it is not (sampled
  /// out): `origin` must then be left as it came, and the source finishes it at once.
  virtual bool onEvent(Event&& event, const std::optional<KeyScreen>& screen, Origin& origin) = 0;
  /// Why the source ended a message of the events topic itself, without an event.
  enum class Ended {
    kReplaySkipped,  ///< finished before a restart or rebalance (assay_events_replay_skipped_total)
    kInvalid,        ///< not a valid event (assay_events_invalid_total, counted already)
    kScreenedOut     ///< its key alone said sampling would not admit it: never parsed
  };
  /// A message the source ended without an event: the last step of its coverage (docs/metrics.md,
  /// "Coverage"), called after its own counter, if any, is counted.
  virtual void ended(Ended why) = 0;
  /// True while the downstream holds back (back-pressure): the source hands it nothing more
  /// in this poll.
  virtual bool holding() const = 0;
  /// A message of the feedback topic: "" when it was read, else why it is invalid (the source
  /// logs it, rate-limited). `partition` is the message's.
  virtual std::string onFeedback(std::string_view payload, std::string_view key,
                                 std::int32_t partition) = 0;
};

/// Finishes that may come late (a sink thread left behind in a stuck write, sinks/
/// sink_queue.hpp) pass through a gate that closes before the source is destroyed.
class FinishGate {
 public:
  /// Runs `finish` unless the gate is closed (then nothing: the source may be gone).
  template <class F>
  void pass(F&& finish) {
    std::lock_guard lock(mu_);
    if (open_) finish();
  }
  void close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }

 private:
  std::mutex mu_;
  bool open_ = true;
};

/// Closes its gate when destroyed: a member declared after the source and before what may
/// finish late (the sinks), so that it closes once they are gone and before the source goes.
struct FinishGateCloser {
  std::shared_ptr<FinishGate> gate = std::make_shared<FinishGate>();
  FinishGateCloser() = default;
  FinishGateCloser(const FinishGateCloser&) = delete;
  FinishGateCloser& operator=(const FinishGateCloser&) = delete;
  ~FinishGateCloser() { gate->close(); }
};

class Source {
 public:
  virtual ~Source() = default;
  /// One turn: hands what one poll returns (waiting at most `timeout_ms` for the first message,
  /// then up to `max` that are already there, fewer once `down` is holding) to `down`, then moves
  /// the committed position over the finished messages. False when the source cannot go on (a fatal
  /// error).
  virtual bool poll(int timeout_ms, Downstream& down, int max) = 0;
  /// The event of `origin` is done (judged and written, or dropped). Thread-safe.
  virtual void finish(const Origin& origin) = 0;
  /// Messages handed on and not finished yet.
  virtual std::size_t pending() const = 0;
  /// Why the source is not consuming ("" = it is). Thread-safe (the admin thread asks).
  virtual std::string notReady() const = 0;
  /// When a message last arrived (or the source last started consuming): the idle timer.
  virtual std::optional<std::chrono::steady_clock::time_point> lastActivity() const = 0;
  /// Stops consuming and commits the finished position; false when the final commit failed.
  virtual bool close() = 0;
};

}  // namespace assay
