#pragma once
/// What every LLM judge of the process shares (behind judges/services.hpp): HTTP clients (one
/// per `ca_file`, each with its own thread), the budget ledger (its own thread, ledger.hpp), the
/// price table (built-in + budget.prices), the LLM and budget series (llm_stats.hpp), and the
/// budget scopes' bookkeeping: today's spend per scope, the projected spend at the end of the
/// day (Projection: the shared spend, every instance's, plus its pace over the last 15 minutes
/// times the time left in the day), the exhausted flag, and a warning once a day when the spend
/// reaches `alert_ratio` × the cap or the projection exceeds the cap.
///
/// Judges are built on one thread at start-up (client(), ledger(), stats(), addScope() are not
/// thread-safe); everything else is.

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "judges/budget_options.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/ledger.hpp"
#include "judges/llm/llm_stats.hpp"
#include "judges/llm/pricing.hpp"

namespace assay::llm {

class LlmJudge;

/// The spend of one scope at the end of its day, projected from the store's shared spend (what
/// every instance has settled, read each second): spent now + the pace of the last
/// kWindowMs (euros per millisecond between the oldest sample in the window and now) × the
/// milliseconds left in the day. Already spent money and other instances count; a pace that
/// stops brings the projection down to the spend within the window (it used to be one
/// instance's call rate × 24 h, ignoring both, and never decayed).
class Projection {
 public:
  static constexpr std::int64_t kWindowMs = std::int64_t{15} * 60 * 1000;  ///< the pace's window
  static constexpr std::int64_t kMinSpanMs = std::int64_t{60} * 1000;      ///< less: no projection
  /// The scope's shared spend at `t_ms` (epoch). A spend lower than the last one is a new day:
  /// the history starts again.
  void add(std::int64_t t_ms, double spent_eur);
  /// Euros at the end of the day, `ms_left` milliseconds away; nullopt with less than
  /// kMinSpanMs of samples.
  std::optional<double> endOfDay(std::int64_t ms_left) const;

 private:
  std::deque<std::pair<std::int64_t, double>> samples_;  // (epoch ms, spent euros), oldest first
};

/// A tenant's or app's budget scope name is its value escaped (core/log_text.hpp) and, past
/// this many bytes, cut with a hash of the whole (LlmJudge::scopes).
inline constexpr std::size_t kMaxScopeNameBytes = 128;

class CallServices {
 public:
  CallServices(const BudgetOptions& budget, prometheus::Registry& registry);
  ~CallServices();  ///< stop()

  const BudgetOptions& budget() const { return budget_; }
  const PriceTable& prices() const { return prices_; }
  /// The HTTP client trusting `ca_file` ("" = the system store), created on first use.
  /// Throws std::runtime_error when the file cannot be loaded.
  HttpClient& client(const std::string& ca_file);
  /// The ledger on budget.store, created (with the "global" scope) on first use. Throws
  /// std::invalid_argument for a malformed store URL.
  Ledger& ledger();
  LlmStats& stats();
  /// A scope with its daily cap in euros (a judge's `daily_limit_eur`). An existing scope takes
  /// the new cap (a configuration reload rebuilt its judge): gauge, alerts and, when the cap was
  /// raised, the exhausted flag follow it.
  void addScope(const std::string& scope, double cap_eur);
  /// A scope met on a call (a tenant or app under budget.tenants / apps "*"): as addScope,
  /// unless `max_added` such scopes were added already (the cap still holds in the store; only
  /// its series are not created). Any thread.
  void ensureScope(const std::string& scope, double cap_eur, std::size_t max_added);
  /// budget.tenants / budget.apps as configured now (a judge built at start-up or by a reload):
  /// the `kind:` scopes ("tenant", "app") they no longer cap lose their series (a removed
  /// tenant would otherwise show its old cap). With "*" every one stays capped. Any thread.
  void retireScopes(const std::string& kind,
                    const std::vector<std::pair<std::string, double>>& caps);

  /// Bookkeeping of one finished call: `exhausted_scope` (when not empty) refused it today
  /// under a cap of `exhausted_cap_eur` €/day. A refusal under a lower cap than the scope's
  /// current one (a reload raised it while the refused call was in flight) does not mark the
  /// scope exhausted again. (The projection reads the store's shared spend, not the calls.)
  void onCall(const std::string& exhausted_scope, double exhausted_cap_eur);
  /// Calls started and not yet answered (judges count them).
  std::atomic<int>& pending() { return pending_; }
  /// Judges register while they live, so that stop() can undo their abandoned calls.
  void addJudge(const LlmJudge* judge);
  void removeJudge(const LlmJudge* judge);

  bool ready() const { return !ledger_ || ledger_->answered(); }
  void refresh();
  void stop();

 private:
  struct Scope {
    double cap = 0;
    BudgetStats::Scope gauges;
    Projection projection;
    std::string refused_day;  // local day on which a reservation was refused
    std::string alerted_day, projection_alerted_day;
  };
  /// After the ledger stopped: releases the reservations and drops the (event, judge) leases of the
  /// calls abandoned at the stop (on this thread), and logs how many.
  void undoAbandoned();
  /// Sets the gauges of every scope from a ledger snapshot (ledger thread).
  void apply(const std::string& day, const std::vector<std::string>& names,
             const std::vector<Snapshot>& snaps);

  const BudgetOptions& budget_;
  prometheus::Registry& registry_;
  PriceTable prices_;
  std::atomic<int> pending_{0};
  bool stopped_ = false;
  std::optional<LlmStats> stats_;
  std::optional<BudgetStats> budget_stats_;
  std::mutex mu_;                   // guards scopes_' bookkeeping (ledger, HTTP and poll threads)
  std::uint64_t evicted_seen_ = 0;  // the store's verdictsEvicted() already counted (mu_)
  std::uint64_t settled_seen_ = 0;  // … and settledEvicted()
  std::map<std::string, Scope> scopes_;
  std::size_t added_on_use_ = 0;         // scopes ensureScope() added (guarded by mu_)
  bool added_on_use_full_ = false;       // its warning was logged
  std::vector<const LlmJudge*> judges_;  // guarded by mu_
  // Threads last: destroyed (stopped) first.
  std::unique_ptr<Ledger> ledger_;
  std::map<std::string, std::unique_ptr<HttpClient>> clients_;  // by ca_file
};

}  // namespace assay::llm
