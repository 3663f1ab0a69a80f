#pragma once
/// The budget ledger off every caller's thread: a `BudgetStore` (memory or Redis, budget.hpp)
/// driven by one thread of its own through a queue, so that no judge worker, HTTP thread or
/// poll thread ever waits for a Redis round trip (docs/ARCHITECTURE.md, "Threads").
///
/// Every operation is queued and answered on the ledger thread, in two FIFO queues: the
/// finishes (and `run()`) before the reservations and snapshots, whenever both wait. A finish
/// stores a verdict the provider has already billed: until it runs, a crash makes the next
/// delivery pay for that call again, so it never waits behind a burst of reservations (a
/// restart's redelivered backlog queues hundreds at once). A finish always follows its own
/// reservation's answer, so the order within one call is kept.
///   reserve  the call's lease on (event id, judge) in the verdict store (or the stored verdict
///            of a redelivered event, or another call's live lease), then its reservation;
///            bounded: when `max_queued_reservations` reservations already wait, it is answered
///            at once on the caller's thread with kUnavailable ("ledger backlog full"): the
///            call is then skipped (fail closed), never queued without bound;
///   finish   the verdict stored and the reservation settled, or the reservation released and
///            the lease dropped; never refused: each belongs to a reservation admitted before,
///            so their number is bounded by the reservations;
///   snapshot the spent euros of some scopes (for the budget gauges); a snapshot already
///            waiting absorbs a new request.
/// `stop()` runs the finishes still queued (money already spent is recorded), drops
/// reservations and snapshots without answering them, and joins the thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "judges/llm/budget.hpp"

namespace assay::llm {

/// One call's start: its lease on (event id, judge) in the verdict store, then its worst case
/// held in `scopes` on `day` (budget.hpp: claim(), reserve()).
struct ReserveRequest {
  std::vector<ScopeLimit> scopes;
  double amount_eur = 0;
  std::string day;             ///< "YYYY-MM-DD" in budget.timezone
  std::string reservation_id;  ///< unique per call; also the call's lease token
  std::int64_t ttl_ms = 0;     ///< the reservation expires after this, milliseconds
  std::int64_t lease_ms = 0;   ///< the lease expires after this (the call's deadline), ms
  bool close_on_refusal = true;
  /// The pair the verdict store keeps the call's outcome under ("" = no claim, no store).
  std::string event_id, judge;
};

struct ReserveAnswer {
  /// kClaimed: the lease is the call's and `result` says whether the budget was reserved (when
  /// it was not, the lease is already dropped). kStored: `stored_verdict` is the pair's
  /// outcome, nothing was reserved. kLeased: another call holds the lease for `lease_left_ms`.
  /// kUnavailable: the store did not answer (`result.error`).
  ClaimResult::Status claim = ClaimResult::Status::kClaimed;
  ReserveResult result;
  std::string stored_verdict;
  std::int64_t lease_left_ms = 0;
};

/// One call's end: the verdict is stored (when the provider billed an answer) before the
/// reservation is settled with the cost; else the reservation is released and the lease
/// dropped, so that the next delivery calls again.
struct FinishRequest {
  std::vector<ScopeLimit> scopes;
  std::string day, reservation_id;     ///< the reservation id is also the lease token
  std::string event_id, judge;         ///< "" = no claim was taken
  std::optional<double> cost_eur;      ///< a billed answer: settle with this; nullopt: release
  std::optional<std::string> verdict;  ///< with a billed answer: kept for kLedgerTtlMs
};

/// The cost a finish settles: `eur` within [0, kMaxLedgerEuros] (budget.hpp); a NaN or negative
/// cost is charged 0 and one above the ledger's range kMaxLedgerEuros, each logged as an error.
/// Settling never throws past the ledger: a reply's usage is hostile input.
double settleableCost(double eur);

class Ledger {
 public:
  /// How reserve() and finish() run.
  ///   kThread  queued and answered on the ledger thread (a store across the network: Redis);
  ///   kInline  on the caller's thread, at once, callbacks too (a store in memory, which never
  ///            waits): a call's state then moves between two threads only, the judge worker
  ///            and the HTTP client's, instead of four hand-offs through the ledger thread
  ///            (docs/BENCHMARKS.md, LLM dispatch). An operation started from inside another's
  ///            callback on the same thread runs when that one returns (no recursion through a
  ///            chain of waiting calls). run() and snapshot() stay on the ledger thread.
  enum class Mode { kThread, kInline };
  /// Starts the ledger thread. `store` must not be null.
  explicit Ledger(std::unique_ptr<BudgetStore> store, std::size_t max_queued_reservations = 10000,
                  Mode mode = Mode::kThread);
  ~Ledger();  ///< stop()
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  /// Queues a reservation; `done` runs once, on the ledger thread (or at once on the caller's
  /// thread with kUnavailable when the backlog is full). After stop() it never runs. The
  /// request is copied when it is queued (kThread, or kInline inside another operation), and
  /// read where it is otherwise: an LLM judge's call builds it in place, and nothing is
  /// allocated.
  void reserve(const ReserveRequest& request, std::function<void(ReserveAnswer)> done);
  /// Queues the end of a call (FinishRequest, copied as reserve()'s); `done` (may be empty)
  /// runs on the ledger thread with whether the store recorded all of it.
  void finish(const FinishRequest& request, std::function<void(bool)> done = {});
  /// Queues a snapshot of `scopes` on `day`; `done` gets one Snapshot per scope, in order.
  /// Ignored while another snapshot waits.
  void snapshot(std::vector<std::string> scopes, std::string day,
                std::function<void(std::vector<Snapshot>)> done);

  /// Whether the store answered the last operation (initially: a ping made on the thread).
  bool answered() const { return answered_.load(); }
  /// Operations queued or running.
  std::size_t queued() const;
  /// Runs `fn` with the store on the ledger thread, in FIFO order with the finishes, before the
  /// reservations waiting (the batch records of llm_batch.cpp). Never refused; run at stop() too,
  /// like a settlement.
  void run(std::function<void(BudgetStore&)> fn);

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
  /// Mode::kInline: runs `now` at once, or queues the std::function<void()> that `later()`
  /// returns to run after the operation this thread is inside of.
  template <class Now, class Later>
  void runInline(Now&& now, Later&& later);
  void endInline();                     // an inline operation's store work is done
  bool record(const FinishRequest& r);  // a finish's store work: whether all was recorded
  ReserveAnswer claimAndReserve(const ReserveRequest& request);  // ledger thread, or inline
  ReserveAnswer answer(const ReserveRequest& request);  // claimAndReserve, total: never throws
  static ReserveAnswer unavailable(std::string why);    // a refusal that reserved nothing

  std::unique_ptr<BudgetStore> store_;
  const std::size_t max_reservations_;
  const Mode mode_;
  std::size_t inline_running_ = 0;  // kInline operations running now (guarded by mu_)
  std::atomic<bool> answered_{false};

  mutable std::mutex mu_;  // guards the queue and the counters below
  std::condition_variable cv_, idle_cv_;
  std::deque<Task> money_;        // finishes and run(): first
  std::deque<Task> tasks_;        // reservations and snapshots
  std::size_t reservations_ = 0;  // reserve tasks queued
  bool snapshot_queued_ = false;
  bool running_task_ = false;
  bool stopping_ = false;
  bool finished_ = false;  // the thread returned
  std::thread thread_;     // last: started once everything above exists
};

}  // namespace assay::llm
