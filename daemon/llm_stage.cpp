#include "daemon/llm_stage.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>

#include "config/loader.hpp"
#include "judges/llm/budget.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/llm_judge.hpp"

namespace assay {
namespace {

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Outcome toOutcome(llm::LlmOutcome o) {
  switch (o) {
    case llm::LlmOutcome::kOk:
      return Outcome::kOk;
    case llm::LlmOutcome::kSchemaError:
      return Outcome::kSchemaError;
    case llm::LlmOutcome::kTruncated:
      return Outcome::kTruncated;
    case llm::LlmOutcome::kRefused:
      return Outcome::kRefused;
    case llm::LlmOutcome::kRateLimited:
      return Outcome::kRateLimited;
    case llm::LlmOutcome::kTimeout:
      return Outcome::kTimeout;
    case llm::LlmOutcome::kProviderError:
      return Outcome::kProviderError;
    case llm::LlmOutcome::kSkippedBudget:
      return Outcome::kSkippedBudget;
    case llm::LlmOutcome::kContextTooLong:
      return Outcome::kContextTooLong;
    case llm::LlmOutcome::kNoContext:
      return Outcome::kNoContext;
    case llm::LlmOutcome::kAlreadyJudged:
      return Outcome::kAlreadyJudged;
  }
  return Outcome::kProviderError;
}

/// The model family: its leading letters ("gpt-4o-mini" → "gpt", "claude-3-5-haiku" → "claude");
/// OpenAI's o-series reasoning models count as "gpt".
std::string modelFamily(std::string_view model) {
  std::string f;
  for (char c : model) {
    if (!std::isalpha(static_cast<unsigned char>(c))) break;
    f.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (f == "o" || f == "chatgpt") return "gpt";
  return f;
}

/// Projected daily spend of one scope: observed call rate × one day × median call cost, over
/// the last calls (at least 5 calls over at least 10 s, else nothing is projected).
class Projection {
 public:
  void add(std::int64_t t_ms, double eur) {
    calls_.push_back({t_ms, eur});
    if (calls_.size() > 200) calls_.pop_front();
  }
  std::optional<double> daily() const {
    if (calls_.size() < 5) return std::nullopt;
    const double span_s = static_cast<double>(calls_.back().first - calls_.front().first) / 1000.0;
    if (span_s < 10) return std::nullopt;
    std::vector<double> costs;
    for (const auto& [t, c] : calls_) costs.push_back(c);
    std::nth_element(costs.begin(), costs.begin() + costs.size() / 2, costs.end());
    const double rate = static_cast<double>(calls_.size() - 1) / span_s;
    return rate * 86400.0 * costs[costs.size() / 2];
  }

 private:
  std::deque<std::pair<std::int64_t, double>> calls_;
};

}  // namespace

struct LlmStage::Impl {
  struct Judge {
    std::size_t config_index;
    std::string name, model;
    std::unique_ptr<llm::LlmJudge> judge;
    prometheus::Counter *tokens_in, *tokens_out, *cost, *usage_missing, *self_judging;
    std::atomic<bool> self_warned{false};
  };
  struct Scope {
    std::string name;
    double limit;
    prometheus::Gauge *spent, *limit_gauge, *exhausted, *projected;
    Projection projection;
    std::string refused_day;  // day on which a reservation was refused
    std::string alerted_day, projection_alerted_day;
  };
  const Config& config;
  std::unique_ptr<llm::BudgetStore> budget;
  std::map<std::string, std::unique_ptr<llm::HttpClient>> clients;  // by ca_file
  std::vector<std::unique_ptr<Judge>> judges;  // destroyed before the clients? see ~LlmStage
  std::vector<std::size_t> indexes;
  std::mutex mu;  // guards scopes' projection/refusal state
  std::map<std::string, Scope> scopes;
  std::atomic<int> pending{0};
  prometheus::Counter* store_errors = nullptr;

  explicit Impl(const Config& c) : config(c) {}
};

LlmStage::LlmStage(const Config& config, Metrics& metrics) : impl_(std::make_unique<Impl>(config)) {
  auto& im = *impl_;
  for (std::size_t i = 0; i < config.judges.size(); ++i)
    if (config.judges[i].llm) im.indexes.push_back(i);
  if (im.indexes.empty()) return;

  im.budget = llm::makeBudgetStore(config.budget.store);
  spdlog::info("budget: {} cap €{}/day ({}), store {}", "global", config.budget.daily_limit_eur,
               config.budget.timezone, im.budget->describe());
  if (!im.budget->shared())
    spdlog::warn(
        "budget.store is memory: the ledger is neither shared between assayd instances "
        "nor kept across restarts; use redis:// in production");

  auto prices = llm::PriceTable::builtin();
  for (const auto& po : config.budget.prices)
    prices.set(po.model, llm::ModelPrice{po.input, po.cached_input, po.output});

  auto& reg = metrics.registry();
  auto& tokens = prometheus::BuildCounter()
                     .Name("assay_judge_tokens_total")
                     .Help("Tokens charged for LLM judge calls, by direction (input, output)")
                     .Register(reg);
  auto& cost = prometheus::BuildCounter()
                   .Name("assay_judge_cost_euros_total")
                   .Help("Cost of LLM judge calls in euros (reported usage × price × usd_to_eur)")
                   .Register(reg);
  auto& missing = prometheus::BuildCounter()
                      .Name("assay_judge_usage_missing_total")
                      .Help("LLM replies without usage, charged a conservative estimate")
                      .Register(reg);
  im.store_errors = &prometheus::BuildCounter()
                         .Name("assay_budget_store_errors_total")
                         .Help(
                             "LLM calls not made because the budget store did not answer "
                             "(fail closed; cheap judges go on)")
                         .Register(reg)
                         .Add({});
  auto& self = prometheus::BuildCounter()
                   .Name("assay_judge_self_judging_total")
                   .Help("Events judged by a model of the same family as the one that answered")
                   .Register(reg);
  auto& spent = prometheus::BuildGauge()
                    .Name("assay_budget_spent_euros")
                    .Help("Euros spent today (local day of budget.timezone)")
                    .Register(reg);
  auto& limit = prometheus::BuildGauge()
                    .Name("assay_budget_limit_euros")
                    .Help("Daily cap in euros")
                    .Register(reg);
  auto& exhausted = prometheus::BuildGauge()
                        .Name("assay_budget_exhausted")
                        .Help("1 once today's cap refused a call")
                        .Register(reg);
  auto& projected = prometheus::BuildGauge()
                        .Name("assay_budget_projected_daily_euros")
                        .Help("Observed call rate × 1 day × median call cost")
                        .Register(reg);
  auto addScope = [&](const std::string& name, double cap) {
    Impl::Scope s{name,
                  cap,
                  &spent.Add({{"scope", name}}),
                  &limit.Add({{"scope", name}}),
                  &exhausted.Add({{"scope", name}}),
                  &projected.Add({{"scope", name}}),
                  {},
                  {},
                  {},
                  {}};
    s.limit_gauge->Set(cap);
    im.scopes.emplace(name, std::move(s));
  };
  addScope("global", config.budget.daily_limit_eur);

  for (std::size_t i : im.indexes) {
    const auto& jc = config.judges[i];
    const auto& o = jc.llm_options;
    llm::LlmJudgeSettings s;
    s.name = jc.name;
    s.rubric = *llm::builtinRubric(o.criterion);
    for (const auto& lv : o.levels)
      for (auto& level : s.rubric.levels)
        if (level.score == lv.score) {
          if (!lv.name.empty()) level.name = lv.name;
          if (!lv.description.empty()) level.description = lv.description;
        }
    for (const auto& ex : o.examples)
      s.rubric.examples.push_back(
          {ex.question, ex.contexts, ex.answer, ex.score, ex.justification});
    s.provider = o.provider == "anthropic" ? llm::Provider::kAnthropic : llm::Provider::kOpenAi;
    s.endpoint = o.endpoint;
    s.model = o.model;
    if (!o.api_key_env.empty()) {
      const char* key = std::getenv(o.api_key_env.c_str());
      if (!key || !*key)
        throw ConfigurationError("judges[" + std::to_string(i) +
                                 "].api_key_env: environment variable " + o.api_key_env +
                                 " is not set (judge '" + jc.name + "')");
      s.api_key = key;
    }
    s.price = *prices.find(o.model);  // the loader refused unpriced models
    s.usd_to_eur = config.budget.usd_to_eur;
    s.daily_limit_eur = o.daily_limit_eur;
    s.global_daily_limit_eur = config.budget.daily_limit_eur;
    s.timezone = config.budget.timezone;
    s.max_tokens = o.max_tokens;
    s.max_input_tokens = o.max_input_tokens;
    s.timeout = llm::Millis{o.timeout_ms};
    s.max_in_flight = o.max_in_flight;
    s.max_waiting = config.limits.queue_capacity;
    s.requests_per_minute = o.requests_per_minute;
    s.tokens_per_minute = o.tokens_per_minute;
    s.retry.max_attempts = o.max_retries + 1;
    s.retry.max_retry_wait = llm::Millis{o.max_retry_wait_ms};
    auto& client = im.clients[o.ca_file];
    if (!client)
      client = std::make_unique<llm::HttpClient>(llm::HttpClientOptions{o.ca_file, true, 16});
    auto j = std::make_unique<Impl::Judge>();
    j->config_index = i;
    j->name = jc.name;
    j->model = o.model;
    j->judge = std::make_unique<llm::LlmJudge>(std::move(s), *client, *im.budget);
    j->tokens_in = &tokens.Add({{"judge", jc.name}, {"model", o.model}, {"direction", "input"}});
    j->tokens_out = &tokens.Add({{"judge", jc.name}, {"model", o.model}, {"direction", "output"}});
    j->cost = &cost.Add({{"judge", jc.name}, {"model", o.model}});
    j->usage_missing = &missing.Add({{"judge", jc.name}});
    j->self_judging = &self.Add({{"judge", jc.name}});
    if (o.daily_limit_eur > 0) addScope("judge:" + jc.name, o.daily_limit_eur);
    spdlog::info("llm judge '{}': {} {} via {} ({}), {} in flight at most", jc.name, o.criterion,
                 o.model, o.endpoint, o.provider, o.max_in_flight);
    im.judges.push_back(std::move(j));
  }
}

LlmStage::~LlmStage() { stop(); }

void LlmStage::stop() {
  if (!impl_) return;
  // The HTTP threads first: abandoned calls then never touch the judges, metrics or sinks.
  impl_->clients.clear();
  impl_->judges.clear();
}

bool LlmStage::enabled() const { return !impl_->indexes.empty(); }
bool LlmStage::ready() const { return !impl_->budget || impl_->budget->ping(); }
const std::vector<std::size_t>& LlmStage::judges() const { return impl_->indexes; }
int LlmStage::pending() const { return impl_->pending.load(); }

void LlmStage::judge(std::size_t config_index, const Event& event,
                     std::function<void(Verdict, double)> done) {
  auto& im = *impl_;
  Impl::Judge* j = nullptr;
  for (auto& candidate : im.judges)
    if (candidate->config_index == config_index) j = candidate.get();
  if (!event.model.empty() && modelFamily(event.model) == modelFamily(j->model)) {
    j->self_judging->Increment();
    if (!j->self_warned.exchange(true))
      spdlog::warn(
          "llm judge '{}' ({}) judges answers of the same model family ('{}'): judges "
          "prefer their own family's answers; judge with another family",
          j->name, j->model, event.model);
  }
  ++im.pending;
  j->judge->judge(event, [this, j, done = std::move(done)](llm::LlmCallResult r) {
    auto& im = *impl_;
    Verdict v;
    v.outcome = toOutcome(r.verdict.outcome);
    if (r.verdict.outcome == llm::LlmOutcome::kOk) v.score = *r.verdict.score;
    v.evidence = r.verdict.justification;
    if (r.verdict.unsupported_claim) v.evidence += " Unsupported: " + *r.verdict.unsupported_claim;
    v.contexts_truncated = r.contexts_truncated;
    v.model = j->model;
    v.input_tokens = r.usage.prompt_tokens;
    v.output_tokens = r.usage.completion_tokens;
    v.cost_eur = r.cost_eur;
    j->tokens_in->Increment(static_cast<double>(r.usage.prompt_tokens));
    j->tokens_out->Increment(static_cast<double>(r.usage.completion_tokens));
    j->cost->Increment(r.cost_eur);
    if (!r.usage_reported) j->usage_missing->Increment();
    if (r.store_unavailable) im.store_errors->Increment();
    {
      std::lock_guard lock(im.mu);
      const auto t = nowMs();
      if (r.cost_eur > 0) {
        im.scopes.at("global").projection.add(t, r.cost_eur);
        if (auto it = im.scopes.find("judge:" + j->name); it != im.scopes.end())
          it->second.projection.add(t, r.cost_eur);
      }
      if (!r.exhausted_scope.empty()) {
        if (auto it = im.scopes.find(r.exhausted_scope); it != im.scopes.end()) {
          it->second.refused_day = llm::budgetDay(im.config.budget.timezone, t);
          it->second.exhausted->Set(1);
        }
      }
    }
    --im.pending;
    done(std::move(v), static_cast<double>(r.latency.count()) / 1000.0);
  });
}

void LlmStage::refreshBudget() {
  auto& im = *impl_;
  if (!im.budget) return;
  const std::string day = llm::budgetDay(im.config.budget.timezone, nowMs());
  std::lock_guard lock(im.mu);
  for (auto& [name, s] : im.scopes) {
    const auto snap = im.budget->spent(name, day);
    if (!snap.available) continue;
    s.spent->Set(snap.spent_eur);
    s.exhausted->Set(s.refused_day == day ? 1 : 0);
    const auto projected = s.projection.daily();
    s.projected->Set(projected.value_or(snap.spent_eur));
    if (s.limit > 0 && snap.spent_eur >= im.config.budget.alert_ratio * s.limit &&
        s.alerted_day != day) {
      s.alerted_day = day;
      spdlog::warn("budget {}: €{:.6f} spent of €{} today (alert_ratio {})", name, snap.spent_eur,
                   s.limit, im.config.budget.alert_ratio);
    }
    if (projected && s.limit > 0 && *projected > s.limit && s.projection_alerted_day != day) {
      s.projection_alerted_day = day;
      spdlog::warn(
          "budget {}: projected €{:.4f}/day exceeds the €{} cap at the current "
          "call rate",
          name, *projected, s.limit);
    }
  }
}

}  // namespace assay
