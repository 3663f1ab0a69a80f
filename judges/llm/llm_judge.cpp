#include "judges/llm/llm_judge.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace assay::llm {

using Steady = std::chrono::steady_clock;

struct LlmJudge::Call {
  Event event;
  Prompt prompt;
  HttpRequest request;
  std::function<void(LlmCallResult)> done;
  std::string day, reservation_id;
  double reserved_eur = 0;
  std::int64_t token_cost = 0;  // rate-limit weight: prompt estimate + max_tokens
  Steady::time_point started = Steady::now();
  int attempts = 0;
  bool answered = false;  // a 2xx reply arrived (billed by the provider)
  std::int64_t ttl_ms = 0;
};

LlmJudge::LlmJudge(LlmJudgeSettings settings, HttpClient& client, BudgetStore& budget)
    : settings_(std::move(settings)),
      client_(client),
      budget_(budget),
      policy_(settings_.retry, std::hash<std::string>{}(settings_.name)),
      breaker_(settings_.breaker_failures, settings_.breaker_open) {
  if (settings_.requests_per_minute > 0)
    rpm_.emplace(settings_.requests_per_minute, std::max(1.0, settings_.requests_per_minute / 6),
                 Steady::now());
  if (settings_.tokens_per_minute > 0)
    tpm_.emplace(settings_.tokens_per_minute, std::max(1.0, settings_.tokens_per_minute / 6),
                 Steady::now());
}

LlmJudge::~LlmJudge() = default;

int LlmJudge::inFlight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

std::vector<ScopeLimit> LlmJudge::scopes() const {
  std::vector<ScopeLimit> s{{"global", settings_.global_daily_limit_eur}};
  if (settings_.daily_limit_eur > 0)
    s.push_back({"judge:" + settings_.name, settings_.daily_limit_eur});
  return s;
}

void LlmJudge::judge(const Event& event, std::function<void(LlmCallResult)> done) {
  const auto t0 = Steady::now();
  auto early = [&](LlmOutcome o, std::string why, std::string scope = {}) {
    LlmCallResult r;
    r.exhausted_scope = std::move(scope);
    r.verdict.outcome = o;
    r.verdict.justification = std::move(why);
    r.latency = std::chrono::duration_cast<Millis>(Steady::now() - t0);
    done(std::move(r));
  };
  {
    std::lock_guard lock(mu_);
    if (waiting_.size() >= settings_.max_waiting)
      return early(LlmOutcome::kRateLimited,
                   "local backlog full: " + std::to_string(settings_.max_waiting) +
                       " calls already wait for a max_in_flight slot");
  }
  if (settings_.rubric.needs_contexts && event.contexts.empty())
    return early(LlmOutcome::kNoContext, "the event has no contexts to judge against");
  auto prompt = buildPrompt(settings_.rubric, event, settings_.max_input_tokens);
  if (!prompt)
    return early(LlmOutcome::kContextTooLong, "question and answer exceed max_input_tokens");

  auto call = std::make_shared<Call>();
  call->started = t0;
  call->event = event;
  call->prompt = std::move(*prompt);
  call->request = buildRequest(settings_.provider, settings_.endpoint, settings_.api_key,
                               settings_.model, call->prompt, settings_.max_tokens);
  call->request.timeout = settings_.timeout;
  call->token_cost = call->prompt.estimated_tokens + settings_.max_tokens;

  // Reserve the worst case before anything is sent.
  const auto worst = estimateUsage(call->prompt.estimated_tokens, settings_.max_tokens);
  call->reserved_eur = costEur(costUsd(settings_.price, worst), settings_.usd_to_eur);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  call->day = budgetDay(settings_.timezone, now_ms);
  call->reservation_id = event.id + "/" + settings_.name + "/" + std::to_string(now_ms) + "/" +
                         std::to_string(sequence_++);
  call->ttl_ms = settings_.timeout.count() * (settings_.retry.max_attempts + 1) +
                 settings_.retry.max_retry_wait.count() * settings_.retry.max_attempts + 60'000;
  call->done = std::move(done);
  reserveThenStart(std::move(call), false);
}

void LlmJudge::finishEarly(const std::shared_ptr<Call>& call, LlmOutcome o, std::string why,
                           std::string scope, bool store_unavailable) {
  LlmCallResult r;
  r.store_unavailable = store_unavailable;
  r.exhausted_scope = std::move(scope);
  r.verdict.outcome = o;
  r.verdict.justification = std::move(why);
  r.latency = std::chrono::duration_cast<Millis>(Steady::now() - call->started);
  call->done(std::move(r));
}

ReserveStatus LlmJudge::reserveThenStart(std::shared_ptr<Call> call, bool from_queue) {
  const auto r = budget_.reserve(scopes(), call->reserved_eur, call->day, call->reservation_id,
                                 call->ttl_ms, /*close_on_refusal=*/true);
  switch (r.status) {
    case ReserveStatus::kExhausted:
      finishEarly(call, LlmOutcome::kSkippedBudget,
                  "daily budget exhausted (" + r.exhausted_scope + ")", r.exhausted_scope);
      return r.status;
    case ReserveStatus::kUnavailable:
      finishEarly(call, LlmOutcome::kSkippedBudget, "budget store unavailable: " + r.error, {},
                  /*store_unavailable=*/true);
      return r.status;
    case ReserveStatus::kBusy: {
      // The cap has room for this call once the calls in flight settle (they reserved their
      // worst case): wait, in arrival order, for one of ours to finish, or poll when the holds
      // are another judge's or daemon's.
      if (Steady::now() - call->started > kMaxBudgetWait) {
        finishEarly(call, LlmOutcome::kSkippedBudget,
                    "budget held by calls in flight for too long (" + r.exhausted_scope + ")");
        return ReserveStatus::kExhausted;
      }
      {
        std::lock_guard lock(mu_);
        if (in_flight_ > 0) {
          if (from_queue)
            budget_waiting_.push_front(std::move(call));
          else
            budget_waiting_.push_back(std::move(call));
          return r.status;
        }
      }
      client_.schedule(kBusyPoll, [this, call] { reserveThenStart(call, false); });
      return r.status;
    }
    case ReserveStatus::kReserved:
      break;
  }
  // A redelivered event (Kafka at-least-once) is not paid for twice: the first reservation of
  // a (event id, judge) pair within 48 h marks it.
  if (!call->event.id.empty() &&
      !budget_.markJudged(call->event.id, settings_.name, kLedgerTtlMs)) {
    budget_.release(call->reservation_id, call->day, scopes());
    finishEarly(call, LlmOutcome::kAlreadyJudged, "already judged within 48 h (redelivery)");
    return ReserveStatus::kReserved;
  }
  bool overflow = false;
  {
    std::lock_guard lock(mu_);
    if (in_flight_ >= settings_.max_in_flight) {
      if (waiting_.size() < settings_.max_waiting) {
        waiting_.push_back(call);
        return ReserveStatus::kReserved;
      }
      overflow = true;
    } else {
      ++in_flight_;
    }
  }
  if (overflow) {
    budget_.release(call->reservation_id, call->day, scopes());
    finishEarly(call, LlmOutcome::kRateLimited,
                "local backlog full: " + std::to_string(settings_.max_waiting) +
                    " calls already wait for a max_in_flight slot");
    return ReserveStatus::kReserved;
  }
  start(std::move(call));
  return ReserveStatus::kReserved;
}

void LlmJudge::start(std::shared_ptr<Call> call) { attempt(std::move(call)); }

void LlmJudge::attempt(std::shared_ptr<Call> call) {
  Millis wait{0};
  bool open = false;
  {
    std::lock_guard lock(mu_);
    const auto now = Steady::now();
    if (!breaker_.allow(now)) {
      open = true;
    } else {
      if (rpm_) wait = std::max(wait, rpm_->take(1, now));
      if (tpm_ && wait == Millis{0})
        wait = std::max(wait, tpm_->take(static_cast<double>(call->token_cost), now));
    }
  }
  if (open) {
    LlmVerdict v;
    v.outcome = LlmOutcome::kProviderError;
    v.justification = "circuit breaker open: " + settings_.endpoint + " keeps failing";
    return finish(std::move(call), std::move(v), std::nullopt);
  }
  if (wait > Millis{0}) {
    client_.schedule(wait, [this, call] { attempt(call); });
    return;
  }
  ++call->attempts;
  client_.submit(call->request,
                 [this, call](HttpResponse res) { onResponse(call, std::move(res)); });
}

void LlmJudge::onResponse(std::shared_ptr<Call> call, HttpResponse res) {
  if (res.status >= 200 && res.status < 300) {
    call->answered = true;
    const auto reply = parseReply(settings_.provider, res.status, res.body);
    {
      std::lock_guard lock(mu_);
      breaker_.onSuccess();
    }
    if (!reply.ok) {
      LlmVerdict v;
      v.outcome = LlmOutcome::kProviderError;
      v.justification = reply.error_type + ": " + reply.error_message;
      return finish(std::move(call), std::move(v), reply.usage);
    }
    auto v = parseVerdict(reply.content, reply.finish, settings_.rubric.minScore(),
                          settings_.rubric.maxScore());
    // Missing usage: charge the conservative estimate (finish() does it).
    return finish(std::move(call), std::move(v),
                  reply.usage ? reply.usage : std::optional<TokenUsage>{});
  }
  AttemptResult ar;
  ar.status = res.status;
  ar.timed_out = res.timed_out;
  if (auto it = res.headers.find("retry-after"); it != res.headers.end())
    ar.retry_after = parseRetryAfter(it->second, std::chrono::system_clock::now());
  if (res.status != 0)
    ar.overloaded = parseReply(settings_.provider, res.status, res.body).overloaded;
  RetryDecision d;
  {
    std::lock_guard lock(mu_);
    // 4xx (429 included) is an answer, not an endpoint down: only 5xx and no-response count.
    if (res.status == 0 || res.status >= 500) {
      const auto now = Steady::now();
      const bool was_open = breaker_.state(now) != CircuitBreaker::State::kClosed;
      breaker_.onFailure(now);
      if (!was_open && breaker_.state(now) == CircuitBreaker::State::kOpen)
        spdlog::warn(
            "llm judge '{}': {} failed {} times in a row; circuit breaker open for {} s "
            "(calls meanwhile end as provider_error)",
            settings_.name, settings_.endpoint, settings_.breaker_failures,
            settings_.breaker_open.count() / 1000);
    }
    d = policy_.decide(call->attempts, ar);
  }
  if (d.retry) {
    client_.schedule(d.wait, [this, call] { attempt(call); });
    return;
  }
  LlmVerdict v;
  v.outcome = d.give_up;
  v.justification = res.status ? "HTTP " + std::to_string(res.status) : res.error;
  finish(std::move(call), std::move(v), std::nullopt);  // error replies are not billed
}

void LlmJudge::finish(std::shared_ptr<Call> call, LlmVerdict verdict,
                      std::optional<TokenUsage> usage) {
  LlmCallResult r;
  r.attempts = call->attempts;
  r.contexts_truncated = call->prompt.contexts_truncated;
  // Only a 2xx reply is billed by providers; it is charged with its reported usage, or with the
  // conservative estimate (prompt estimate + max_tokens) when it reports none.
  const bool answered = call->answered;
  if (!answered) usage = TokenUsage{};
  if (!usage) usage = estimateUsage(call->prompt.estimated_tokens, settings_.max_tokens);
  r.usage = *usage;
  r.usage_reported = usage->reported;
  r.cost_usd = costUsd(settings_.price, *usage);
  r.cost_eur = costEur(r.cost_usd, settings_.usd_to_eur);
  if (answered && (r.usage.prompt_tokens > 0 || r.usage.completion_tokens > 0)) {
    budget_.settle(call->reservation_id, call->day, scopes(), r.cost_eur);
  } else {
    budget_.release(call->reservation_id, call->day, scopes());
    r.cost_usd = r.cost_eur = 0;
  }
  r.verdict = std::move(verdict);
  r.latency = std::chrono::duration_cast<Millis>(Steady::now() - call->started);
  std::shared_ptr<Call> next;
  std::deque<std::shared_ptr<Call>> retry_budget;
  {
    std::lock_guard lock(mu_);
    if (!waiting_.empty()) {
      next = waiting_.front();
      waiting_.pop_front();
    } else {
      --in_flight_;
    }
    retry_budget.swap(budget_waiting_);  // this call's hold is gone: try their reservations again
  }
  call->done(std::move(r));
  if (next) start(std::move(next));
  // In arrival order; stop at the first that is still "busy" (it goes back to the front).
  while (!retry_budget.empty()) {
    auto c = std::move(retry_budget.front());
    retry_budget.pop_front();
    if (reserveThenStart(std::move(c), /*from_queue=*/true) == ReserveStatus::kBusy) break;
  }
  if (!retry_budget.empty()) {
    std::lock_guard lock(mu_);
    for (auto it = retry_budget.rbegin(); it != retry_budget.rend(); ++it)
      budget_waiting_.push_front(std::move(*it));
  }
}

}  // namespace assay::llm
