#pragma once
/// The budget ledger off every caller's thread: a `BudgetStore` (memory or Redis, budget.hpp)
/// driven by one thread of its own through a queue, so that no judge worker, HTTP thread or
/// poll thread ever waits for a Redis round trip (docs/ARCHITECTURE.md, "Threads").
///
/// Every operation is queued and answered on the ledger thread, in FIFO order:
///   reserve  bounded: when `max_queued_reservations` reservations already wait, it is answered
///            at once on the caller's thread with kUnavailable ("ledger backlog full"): the
///            call is then skipped (fail closed), never queued without bound;
///   settle, release
///            never refused: each belongs to a reservation admitted before, so their number is
///            bounded by the reservations;
///   snapshot the spent euros of some scopes (for the budget gauges); a snapshot already
///            waiting absorbs a new request.
/// `stop()` runs the settles and releases still queued (money already spent is recorded), drops
/// reservations and snapshots without answering them, and joins the thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "judges/llm/budget.hpp"

namespace assay::llm {

/// One reservation: the worst case of a call, held in `scopes` on `day` (budget.hpp, reserve()).
struct ReserveRequest {
  std::vector<ScopeLimit> scopes;
  double amount_eur = 0;
  std::string day;             ///< "YYYY-MM-DD" in budget.timezone
  std::string reservation_id;  ///< unique per call
  std::int64_t ttl_ms = 0;     ///< the reservation expires after this, milliseconds
  bool close_on_refusal = true;
  /// When not empty and the reservation succeeds, the (event id, judge) pair is marked judged
  /// for kLedgerTtlMs; an existing mark releases the reservation and sets `already_judged`.
  std::string mark_event_id, mark_judge;
};

struct ReserveAnswer {
  ReserveResult result;
  bool already_judged = false;  ///< the reservation was released: a redelivered event
};

class Ledger {
 public:
  /// Starts the ledger thread. `store` must not be null.
  explicit Ledger(std::unique_ptr<BudgetStore> store, std::size_t max_queued_reservations = 10000);
  ~Ledger();  ///< stop()
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  /// Queues a reservation; `done` runs once, on the ledger thread (or at once on the caller's
  /// thread with kUnavailable when the backlog is full). After stop() it never runs.
  void reserve(ReserveRequest request, std::function<void(ReserveAnswer)> done);
  /// Queues a settlement of `actual_eur`; `done` (may be empty) runs on the ledger thread with
  /// whether the store recorded it.
  void settle(std::string reservation_id, std::string day, std::vector<ScopeLimit> scopes,
              double actual_eur, std::function<void(bool)> done = {});
  /// Queues a release (no call was answered, nothing is spent).
  void release(std::string reservation_id, std::string day, std::vector<ScopeLimit> scopes,
               std::function<void(bool)> done = {});
  /// Queues a snapshot of `scopes` on `day`; `done` gets one Snapshot per scope, in order.
  /// Ignored while another snapshot waits.
  void snapshot(std::vector<std::string> scopes, std::string day,
                std::function<void(std::vector<Snapshot>)> done);

  /// Whether the store answered the last operation (initially: a ping made on the thread).
  bool answered() const { return answered_.load(); }
  /// Operations queued or running.
  std::size_t queued() const;
  /// The store itself (thread-safe), e.g. to read a snapshot after sync() in a test.
  BudgetStore& store() { return *store_; }

  /// Blocks until every operation queued before the call has run (tests and tools).
  void sync();
  /// Runs the settles and releases still queued (and their callbacks), drops the rest, joins
  /// the thread. Idempotent.
  void stop();
  /// After stop() only: a snapshot taken on the caller's thread (the final budget gauges).
  std::vector<Snapshot> snapshotStopped(const std::vector<std::string>& scopes,
                                        const std::string& day);

 private:
  enum class Kind { kReserve, kMoney, kSnapshot };
  struct Task {
    Kind kind = Kind::kMoney;
    std::function<void()> run;
  };
  void push(Task task);
  void loop();

  std::unique_ptr<BudgetStore> store_;
  const std::size_t max_reservations_;
  std::atomic<bool> answered_{false};

  mutable std::mutex mu_;  // guards the queue and the counters below
  std::condition_variable cv_, idle_cv_;
  std::deque<Task> tasks_;
  std::size_t reservations_ = 0;  // reserve tasks queued
  bool snapshot_queued_ = false;
  bool running_task_ = false;
  bool stopping_ = false;
  bool finished_ = false;  // the thread returned
  std::thread thread_;     // last: started once everything above exists
};

}  // namespace assay::llm
