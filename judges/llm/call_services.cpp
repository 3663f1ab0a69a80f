#include "judges/llm/call_services.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <vector>

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

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

PriceTable pricesOf(const BudgetOptions& budget) {
  auto prices = PriceTable::builtin();
  for (const auto& po : budget.prices)
    prices.set(po.model, ModelPrice{po.input, po.cached_input, po.output, po.cache_write});
  return prices;
}

}  // namespace

void Projection::add(std::int64_t t_ms, double eur) {
  calls_.push_back({t_ms, eur});
  if (calls_.size() > 200) calls_.pop_front();
}

std::optional<double> Projection::daily() const {
  if (calls_.size() < 5) return std::nullopt;
  const double span_s = static_cast<double>(calls_.back().first - calls_.front().first) / 1000.0;
  if (span_s < 10) return std::nullopt;
  std::vector<double> costs;
  for (const auto& [t, c] : calls_) costs.push_back(c);
  std::nth_element(costs.begin(), costs.begin() + costs.size() / 2, costs.end());
  const double rate = static_cast<double>(calls_.size() - 1) / span_s;
  return rate * 86400.0 * costs[costs.size() / 2];
}

CallServices::CallServices(const BudgetOptions& budget, prometheus::Registry& registry)
    : budget_(budget), registry_(registry), prices_(pricesOf(budget)) {}

CallServices::~CallServices() { stop(); }

HttpClient& CallServices::client(const std::string& ca_file) {
  auto& c = clients_[ca_file];
  if (!c) c = std::make_unique<HttpClient>(HttpClientOptions{ca_file, true, 16});
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
  ledger_ = std::make_unique<Ledger>(std::move(store));
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

void CallServices::onCall(const std::string& judge_scope, double cost_eur,
                          const std::string& exhausted_scope, double exhausted_cap_eur) {
  const auto t = nowMs();
  std::lock_guard lock(mu_);
  if (cost_eur > 0) {
    for (const std::string& name : {std::string("global"), judge_scope})
      if (auto it = scopes_.find(name); it != scopes_.end()) it->second.projection.add(t, cost_eur);
  }
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
  }
  const std::string day = budgetDay(budget_.timezone, nowMs());
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
    const auto projected = s.projection.daily();
    s.gauges.projected->Set(projected.value_or(spent));
    if (s.cap > 0 && spent >= budget_.alert_ratio * s.cap && s.alerted_day != day) {
      s.alerted_day = day;
      spdlog::warn("budget {}: €{:.6f} spent of €{} today (alert_ratio {})", names[i], spent, s.cap,
                   budget_.alert_ratio);
    }
    if (projected && s.cap > 0 && *projected > s.cap && s.projection_alerted_day != day) {
      s.projection_alerted_day = day;
      spdlog::warn("budget {}: projected €{:.4f}/day exceeds the €{} cap at the current call rate",
                   names[i], *projected, s.cap);
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
  const std::string day = budgetDay(budget_.timezone, nowMs());
  apply(day, names, ledger_->snapshotStopped(names, day));
}

}  // namespace llm
}  // namespace assay
