#include "judges/llm/call_services.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <unordered_set>
#include <vector>

#include "core/clock.hpp"
#include "core/log_text.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/services.hpp"

namespace assay {

// ---- JudgeServices: the generic face the pipeline sees --------------------------------------

JudgeServices::JudgeServices(const BudgetOptions& budget, prometheus::Registry& registry)
    : calls_(std::make_unique<llm::CallServices>(budget, registry)) {}
JudgeServices::~JudgeServices() { stop(); }
bool JudgeServices::ready() const { return calls_->ready(); }
int JudgeServices::pending() const { return calls_->pending().load(); }
void JudgeServices::refresh() { calls_->refresh(); }
void JudgeServices::stop() { calls_->stop(); }

namespace llm {
namespace {

PriceTable pricesOf(const BudgetOptions& budget) {
  auto prices = PriceTable::builtin();
  for (const auto& po : budget.prices)
    prices.set(po.model, ModelPrice{po.input, po.cached_input, po.output, po.cache_write});
  return prices;
}

}  // namespace

void Projection::add(std::int64_t t_ms, double spent_eur) {
  if (!samples_.empty() && (spent_eur < samples_.back().second || t_ms < samples_.back().first))
    samples_.clear();  // a new day (or a clock stepped back): the pace starts again
  samples_.push_back({t_ms, spent_eur});
  // Keep one sample at or before the window's start, so that the pace spans the whole window.
  while (samples_.size() > 2 && samples_[1].first <= t_ms - kWindowMs) samples_.pop_front();
}

std::optional<double> Projection::endOfDay(std::int64_t ms_left) const {
  if (samples_.size() < 2) return std::nullopt;
  const auto& [t0, s0] = samples_.front();
  const auto& [t1, s1] = samples_.back();
  if (t1 - t0 < kMinSpanMs) return std::nullopt;
  const double pace = (s1 - s0) / static_cast<double>(t1 - t0);  // euros per millisecond
  return s1 + pace * static_cast<double>(std::max<std::int64_t>(0, ms_left));
}

CallServices::CallServices(const BudgetOptions& budget, prometheus::Registry& registry)
    : budget_(budget), registry_(registry), prices_(pricesOf(budget)) {}

CallServices::~CallServices() { stop(); }

HttpClient& CallServices::client(const std::string& ca_file) {
  auto& c = clients_[ca_file];
  // Retry-After is the one response header the judges read (attempt.cpp).
  if (!c) c = std::make_unique<HttpClient>(HttpClientOptions{ca_file, true, 16, {"retry-after"}});
  return *c;
}

Ledger& CallServices::ledger() {
  if (ledger_) return *ledger_;
  auto store =
      makeBudgetStore(budget_.store, budget_.key_prefix.empty() ? "assay:" : budget_.key_prefix,
                      budget_.store_password);
  spdlog::info("budget: global cap €{}/day ({}), store {}", budget_.daily_limit_eur,
               budget_.timezone, store->describe());
  if (!store->shared())
    spdlog::warn(
        "budget.store is memory: the ledger is neither shared between assayd instances "
        "nor kept across restarts; use redis:// in production");
  // A store in memory never waits: its operations run on the caller's thread (Ledger::Mode).
  const auto mode = store->shared() ? Ledger::Mode::kThread : Ledger::Mode::kInline;
  ledger_ = std::make_unique<Ledger>(std::move(store), 10000, mode);
  addScope("global", budget_.daily_limit_eur);
  return *ledger_;
}

LlmStats& CallServices::stats() {
  if (!stats_) stats_.emplace(registry_);
  return *stats_;
}

void CallServices::addScope(const std::string& scope, double cap_eur) {
  if (!budget_stats_) budget_stats_.emplace(registry_);
  std::lock_guard lock(mu_);
  if (const auto it = scopes_.find(scope); it != scopes_.end()) {
    Scope& s = it->second;
    if (s.cap == cap_eur) return;
    spdlog::info("budget {}: cap €{}/day from now on (was €{})", scope, cap_eur, s.cap);
    if (cap_eur > s.cap) s.refused_day.clear();  // the store opens it again under a raised cap
    s.alerted_day.clear();
    s.projection_alerted_day.clear();
    s.cap = cap_eur;
    s.gauges.limit->Set(cap_eur);
    return;
  }
  Scope s{cap_eur, budget_stats_->forScope(scope), {}, {}, {}, {}};
  s.gauges.limit->Set(cap_eur);
  scopes_.emplace(scope, std::move(s));
}

void CallServices::ensureScope(const std::string& scope, double cap_eur, std::size_t max_added) {
  {
    std::lock_guard lock(mu_);
    if (const auto it = scopes_.find(scope); it != scopes_.end() && it->second.cap == cap_eur)
      return;
    if (scopes_.find(scope) == scopes_.end()) {
      if (added_on_use_ >= max_added) {
        if (!added_on_use_full_)
          spdlog::warn(
              "budget: {} tenant and app scopes have series already; '{}' and later ones are "
              "capped without (their spend is in the store)",
              max_added, scope);
        added_on_use_full_ = true;
        return;
      }
      ++added_on_use_;
    }
  }
  addScope(scope, cap_eur);
}

void CallServices::retireScopes(const std::string& kind,
                                const std::vector<std::pair<std::string, double>>& caps) {
  if (std::any_of(caps.begin(), caps.end(), [](const auto& c) { return c.first == "*"; })) return;
  const std::string prefix = kind + ":";
  std::unordered_set<std::string> kept;  // the scope names of the caps: one pass, not caps × scopes
  kept.reserve(caps.size());
  for (const auto& c : caps) kept.insert(prefix + logText(c.first, kMaxScopeNameBytes));
  std::lock_guard lock(mu_);
  if (!budget_stats_) return;
  std::size_t retired = 0;
  for (auto it = scopes_.begin(); it != scopes_.end();) {
    const std::string& scope = it->first;
    if (scope.rfind(prefix, 0) != 0 || kept.count(scope) > 0) {
      ++it;
      continue;
    }
    if (++retired <= 10)
      spdlog::info("budget {}: no cap from now on (not in budget.{}s)", scope, kind);
    budget_stats_->spent.Remove(it->second.gauges.spent);
    budget_stats_->limit.Remove(it->second.gauges.limit);
    budget_stats_->exhausted.Remove(it->second.gauges.exhausted);
    budget_stats_->projected.Remove(it->second.gauges.projected);
    it = scopes_.erase(it);
  }
  if (retired > 10)
    spdlog::info("budget: {} {} scopes have no cap from now on (the first 10 logged)", retired,
                 kind);
}

void CallServices::addJudge(const LlmJudge* judge) {
  std::lock_guard lock(mu_);
  judges_.push_back(judge);
}

void CallServices::removeJudge(const LlmJudge* judge) {
  std::lock_guard lock(mu_);
  std::erase(judges_, judge);
}

void CallServices::undoAbandoned() {
  std::vector<const LlmJudge*> judges;
  {
    std::lock_guard lock(mu_);
    judges = judges_;
  }
  std::size_t n = 0, failed = 0;
  auto& store = ledger_->store();
  for (const auto* j : judges)
    for (const auto& a : j->abandon()) {
      ++n;
      bool ok = store.release(a.reservation_id, a.day, a.scopes);
      if (!a.event_id.empty())
        ok = store.releaseClaim(a.event_id, j->settings().name, a.reservation_id) && ok;
      failed += ok ? 0 : 1;
    }
  if (n == 0) return;
  if (failed == 0)
    spdlog::info(
        "llm: {} call(s) abandoned at the stop: reservations released and leases dropped, so "
        "their redelivered events are judged again",
        n);
  else
    spdlog::warn(
        "llm: {} call(s) abandoned at the stop; for {} of them the budget store did not answer: "
        "their reservations and leases expire with the calls' deadlines, after which their "
        "redelivered events are judged again",
        n, failed);
}

void CallServices::onCall(const std::string& exhausted_scope, double exhausted_cap_eur) {
  const auto t = epochMs();
  std::lock_guard lock(mu_);
  if (!exhausted_scope.empty()) {
    auto it = scopes_.find(exhausted_scope);
    if (it != scopes_.end() && exhausted_cap_eur >= it->second.cap) {
      const std::string day = budgetDay(budget_.timezone, t);
      // One line a day and scope when the cap first refuses a call (the calls after it are
      // counted, as skipped_budget, in assay_judge_runs_total).
      if (it->second.refused_day != day)
        spdlog::warn(
            "budget {}: the daily cap of €{} is reached for {} ({}): LLM calls of this scope end "
            "as skipped_budget until the day ends",
            exhausted_scope, it->second.cap, day, budget_.timezone);
      it->second.refused_day = day;
      it->second.gauges.exhausted->Set(1);
    }
  }
}

void CallServices::refresh() {
  if (!ledger_) return;
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, s] : scopes_) names.push_back(name);
    if (const auto evicted = ledger_->store().verdictsEvicted(); evicted > evicted_seen_) {
      stats().verdicts_evicted.Increment(static_cast<double>(evicted - evicted_seen_));
      evicted_seen_ = evicted;
    }
    if (const auto evicted = ledger_->store().settledEvicted(); evicted > settled_seen_) {
      stats().settled_evicted.Increment(static_cast<double>(evicted - settled_seen_));
      settled_seen_ = evicted;
    }
  }
  const std::string day = budgetDay(budget_.timezone, epochMs());
  ledger_->snapshot(names, day, [this, names, day](const std::vector<Snapshot>& snaps) {
    apply(day, names, snaps);
  });
}

void CallServices::apply(const std::string& day, const std::vector<std::string>& names,
                         const std::vector<Snapshot>& snaps) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < names.size() && i < snaps.size(); ++i) {
    auto it = scopes_.find(names[i]);
    if (it == scopes_.end() || !snaps[i].available) continue;
    auto& s = it->second;
    const double spent = snaps[i].spent_eur;
    s.gauges.spent->Set(spent);
    s.gauges.exhausted->Set(s.refused_day == day ? 1 : 0);
    const auto now = epochMs();
    s.projection.add(now, spent);
    const auto projected = s.projection.endOfDay(msUntilNextDay(budget_.timezone, now));
    s.gauges.projected->Set(projected.value_or(spent));
    if (s.cap > 0 && spent >= budget_.alert_ratio * s.cap && s.alerted_day != day) {
      s.alerted_day = day;
      spdlog::warn("budget {}: €{:.6f} spent of €{} today (alert_ratio {})", names[i], spent, s.cap,
                   budget_.alert_ratio);
    }
    if (projected && s.cap > 0 && *projected > s.cap && s.projection_alerted_day != day) {
      s.projection_alerted_day = day;
      spdlog::warn(
          "budget {}: projected €{:.4f} at the end of the day (€{:.4f} spent, the last 15 "
          "minutes' pace until midnight in {}) exceeds the €{} cap",
          names[i], *projected, spent, budget_.timezone, s.cap);
    }
  }
}

void CallServices::stop() {
  // HTTP threads first: no call finishes any more, so nothing new reaches the ledger; then the
  // ledger records the settlements still queued and stops.
  for (auto& [ca, c] : clients_) c->stop();
  if (!ledger_ || stopped_) return;
  stopped_ = true;
  ledger_->stop();
  undoAbandoned();
  // The last scrape shows the final spend: one snapshot on this thread (the poll loop is over).
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, s] : scopes_) names.push_back(name);
  }
  const std::string day = budgetDay(budget_.timezone, epochMs());
  apply(day, names, ledger_->snapshotStopped(names, day));
}

}  // namespace llm
}  // namespace assay
