#include "judges/llm/ledger.hpp"

#include <spdlog/spdlog.h>

#include <cmath>

namespace assay::llm {

Ledger::Ledger(std::unique_ptr<BudgetStore> store, std::size_t max_queued_reservations, Mode mode)
    : store_(std::move(store)), max_reservations_(max_queued_reservations), mode_(mode) {
  thread_ = std::thread([this] {
    answered_ = store_->ping();
    loop();
  });
}

Ledger::~Ledger() { stop(); }

double settleableCost(double eur) {
  if (std::isnan(eur) || eur < 0) {
    spdlog::error("budget ledger: a cost of {} € cannot be settled; charged 0", eur);
    return 0;
  }
  if (eur > kMaxLedgerEuros) {
    spdlog::error("budget ledger: a cost of {} € is beyond the ledger's {} €; charged {} €", eur,
                  kMaxLedgerEuros, kMaxLedgerEuros);
    return kMaxLedgerEuros;
  }
  return eur;
}

void Ledger::push(Task task) {
  {
    std::lock_guard lock(mu_);
    (task.kind == Kind::kMoney ? money_ : tasks_).push_back(std::move(task));
  }
  cv_.notify_one();
}

namespace {
/// Mode::kInline's per-thread state: whether an operation runs on this thread now, and the
/// operations its callbacks started meanwhile (run after it, in order).
struct InlineRun {
  bool active = false;
  std::deque<std::function<void()>> pending;
};
thread_local InlineRun inline_run;

template <class F>
void runGuarded(F& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("budget ledger: {}", e.what());
  }
}
}  // namespace

template <class Now, class Later>
void Ledger::runInline(Now&& now, Later&& later) {
  if (inline_run.active) {  // started by a callback of the operation running here: later
    inline_run.pending.emplace_back(later());
    return;
  }
  inline_run.active = true;  // the usual case: run at once, nothing copied or allocated
  runGuarded(now);
  while (!inline_run.pending.empty()) {
    auto next = std::move(inline_run.pending.front());
    inline_run.pending.pop_front();
    runGuarded(next);
  }
  inline_run.active = false;
}

void Ledger::reserve(const ReserveRequest& request, std::function<void(ReserveAnswer)> done) {
  if (mode_ == Mode::kInline) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;  // abandoned, like the calls in flight: never answered
      ++inline_running_;
    }
    const auto run = [this](const ReserveRequest& r, std::function<void(ReserveAnswer)>& d) {
      ReserveAnswer a = answer(r);
      endInline();
      d(std::move(a));
    };
    runInline([&] { run(request, done); },
              [&] {  // a copy: the caller's request may be gone by then
                return [run, r = request, d = std::move(done)]() mutable { run(r, d); };
              });
    return;
  }
  {
    std::unique_lock lock(mu_);
    if (stopping_) return;  // abandoned, like the calls in flight: never answered
    if (reservations_ >= max_reservations_) {
      lock.unlock();
      done(unavailable("ledger backlog full: " + std::to_string(max_reservations_) +
                       " reservations wait for the budget store"));
      return;
    }
    ++reservations_;
    tasks_.push_back(
        Task{Kind::kReserve, [this, r = request, done = std::move(done)] { done(answer(r)); }});
  }
  cv_.notify_one();
}

ReserveAnswer Ledger::unavailable(std::string why) {
  ReserveAnswer a;
  a.claim = ClaimResult::Status::kUnavailable;
  a.result.status = ReserveStatus::kUnavailable;
  a.result.error = std::move(why);
  return a;
}

ReserveAnswer Ledger::answer(const ReserveRequest& r) {
  try {
    return claimAndReserve(r);
  } catch (const std::exception& e) {
    // Total: the call always gets its answer, or it would hold its slot for good (a refusal;
    // nothing was reserved).
    ReserveAnswer a = unavailable(std::string("budget ledger: ") + e.what());
    spdlog::error("{}", a.result.error);
    return a;
  }
}

ReserveAnswer Ledger::claimAndReserve(const ReserveRequest& r) {
  ReserveAnswer a;
  const bool claiming = !r.event_id.empty();
  if (claiming) {
    ClaimResult c = store_->claim(r.event_id, r.judge, r.reservation_id, r.lease_ms);
    a.claim = c.status;
    answered_ = c.status != ClaimResult::Status::kUnavailable;
    switch (c.status) {
      case ClaimResult::Status::kStored:
        a.stored_verdict = std::move(c.verdict);
        return a;
      case ClaimResult::Status::kLeased:
        a.lease_left_ms = c.lease_left_ms;
        return a;
      case ClaimResult::Status::kUnavailable:
        a.result.status = ReserveStatus::kUnavailable;
        a.result.error = std::move(c.error);
        return a;
      case ClaimResult::Status::kClaimed:
        break;
    }
  }
  try {
    a.result = store_->reserve(r.scopes, r.amount_eur, r.day, r.reservation_id, r.ttl_ms,
                               r.close_on_refusal);
    answered_ = a.result.status != ReserveStatus::kUnavailable;
  } catch (const std::exception& e) {  // arguments the store refuses: nothing was reserved
    a.result = ReserveResult{};
    a.result.status = ReserveStatus::kUnavailable;
    a.result.error = std::string("budget ledger: ") + e.what();
    spdlog::error("{}", a.result.error);
  }
  if (!a.result.ok() && claiming) store_->releaseClaim(r.event_id, r.judge, r.reservation_id);
  return a;
}

void Ledger::finish(const FinishRequest& request, std::function<void(bool)> done) {
  if (mode_ == Mode::kInline) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;  // as a finish queued after the thread stopped
      ++inline_running_;
    }
    const auto run = [this](const FinishRequest& r, std::function<void(bool)>& d) {
      const bool ok = record(r);
      endInline();
      if (d) d(ok);
    };
    runInline([&] { run(request, done); },
              [&] {  // a copy: the caller's request may be gone by then
                return [run, r = request, d = std::move(done)]() mutable { run(r, d); };
              });
    return;
  }
  push(Task{Kind::kMoney, [this, r = request, done = std::move(done)] {
              const bool ok = record(r);
              if (done) done(ok);
            }});
}

void Ledger::endInline() {
  std::lock_guard lock(mu_);
  if (--inline_running_ == 0 && money_.empty() && tasks_.empty() && !running_task_)
    idle_cv_.notify_all();
}

bool Ledger::record(const FinishRequest& r) {  // the ledger thread, or the caller's (kInline)
  // Total: each step that throws counts as not recorded, the next steps still run,
  // and `done` always runs: it frees the call's slot (issue: a settle that threw
  // left max_in_flight slots taken for good).
  bool store_answered = true;  // a refusal by throwing is not the store's silence
  const auto step = [&store_answered](const char* what, const auto& fn) {
    try {
      const bool done = fn();
      store_answered = store_answered && done;
      return done;
    } catch (const std::exception& e) {
      spdlog::error("budget ledger: {}: {}", what, e.what());
      return false;
    }
  };
  bool ok = true;
  // The verdict first: a crash between the two steps then leaves a call settled by
  // its reservation's expiry, never one that a redelivery would pay for again.
  if (r.verdict && !r.event_id.empty())
    ok = step("storing a verdict",
              [&] { return store_->storeVerdict(r.event_id, r.judge, *r.verdict, kLedgerTtlMs); });
  if (r.cost_eur) {
    // A cost beyond what the ledger holds (a reply's usage no provider bills) is
    // charged as the most it holds: the day's caps close rather than stay open.
    const double cost = settleableCost(*r.cost_eur);
    ok =
        step("settling", [&] { return store_->settle(r.reservation_id, r.day, r.scopes, cost); }) &&
        ok;
  } else {
    ok =
        step("releasing", [&] { return store_->release(r.reservation_id, r.day, r.scopes); }) && ok;
    if (!r.event_id.empty())
      ok = step("dropping a lease",
                [&] { return store_->releaseClaim(r.event_id, r.judge, r.reservation_id); }) &&
           ok;
  }
  answered_ = store_answered;
  return ok;
}

void Ledger::run(std::function<void(BudgetStore&)> fn) {
  push(Task{Kind::kMoney, [this, fn = std::move(fn)] { fn(*store_); }});
}

void Ledger::snapshot(std::vector<std::string> scopes, std::string day,
                      std::function<void(std::vector<Snapshot>)> done) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || snapshot_queued_) return;
    snapshot_queued_ = true;
    tasks_.push_back(Task{Kind::kSnapshot, [this, scopes = std::move(scopes), day = std::move(day),
                                            done = std::move(done)] {
                            std::vector<Snapshot> out;
                            bool ok = true;
                            for (const auto& s : scopes) {
                              try {
                                out.push_back(store_->spent(s, day));
                              } catch (const std::exception& e) {
                                spdlog::error("budget ledger: snapshot of {}: {}", s, e.what());
                                out.emplace_back();  // available = false
                              }
                              ok = ok && out.back().available;
                            }
                            answered_ = ok;
                            done(std::move(out));
                          }});
  }
  cv_.notify_one();
}

std::size_t Ledger::queued() const {
  std::lock_guard lock(mu_);
  return money_.size() + tasks_.size() + (running_task_ ? 1 : 0) + inline_running_;
}

void Ledger::sync() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] {
    return (money_.empty() && tasks_.empty() && !running_task_ && inline_running_ == 0) ||
           finished_;
  });
}

void Ledger::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !money_.empty() || !tasks_.empty(); });
      if (stopping_) {
        // Money first: settles and releases still queued are recorded; reservations and
        // snapshots are dropped unanswered (their calls were never made).
        tasks_.clear();
        reservations_ = 0;
        snapshot_queued_ = false;
      }
      if (money_.empty() && tasks_.empty()) {
        running_task_ = false;
        finished_ = stopping_;
        idle_cv_.notify_all();
        if (stopping_) return;
        continue;
      }
      // A finish never waits behind reservations queued before it (ledger.hpp).
      auto& from = money_.empty() ? tasks_ : money_;
      task = std::move(from.front());
      from.pop_front();
      if (task.kind == Kind::kReserve) --reservations_;
      if (task.kind == Kind::kSnapshot) snapshot_queued_ = false;
      running_task_ = true;
    }
    try {
      task.run();
    } catch (const std::exception& e) {
      // Argument errors are programming errors (budget.hpp); a daemon must not die of one.
      spdlog::error("budget ledger: {}", e.what());
    }
    {
      std::lock_guard lock(mu_);
      running_task_ = false;
      if (money_.empty() && tasks_.empty()) idle_cv_.notify_all();
    }
  }
}

void Ledger::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::vector<Snapshot> Ledger::snapshotStopped(const std::vector<std::string>& scopes,
                                              const std::string& day) {
  std::vector<Snapshot> out;
  {
    std::lock_guard lock(mu_);
    if (!finished_) return out;  // the thread still owns the store
  }
  for (const auto& s : scopes) out.push_back(store_->spent(s, day));
  return out;
}

}  // namespace assay::llm
