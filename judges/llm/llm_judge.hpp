#pragma once
/// One LLM judge: a criterion's rubric, one provider endpoint and model, a daily budget. It turns
/// an event into a verdict without ever blocking the caller:
///   no contexts for a context rubric → no_context; prompt over max_input_tokens even without
///   contexts → context_too_long (no call) → reserve the worst case (prompt estimate +
///   max_tokens, priced) in the budget scopes "global" and "judge:<name>" → skipped_budget when
///   the day's cap is reached (then closed for the day, for every daemon) or when the store does
///   not answer (fail closed); when only the reservations of calls in flight stand in the way,
///   wait until they settle → wait for a slot (max_in_flight)
///   and the rate limits (requests and tokens per minute) → call, retrying 429/5xx/529/timeouts
///   with capped full-jitter backoff and Retry-After as a floor (retry.hpp), behind a circuit
///   breaker → parse the verdict (verdict.hpp) → settle the reservation with the reported usage
///   (or the conservative estimate when the reply has none), or release it when no call was
///   answered. Failures are outcomes, never scores.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "judges/event.hpp"
#include "judges/llm/budget.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/provider.hpp"
#include "judges/llm/retry.hpp"
#include "judges/llm/rubric.hpp"
#include "judges/llm/verdict.hpp"

namespace assay::llm {

struct LlmJudgeSettings {
  std::string name;  ///< configured judge name (budget scope "judge:<name>")
  Rubric rubric;     ///< criterion, levels, examples
  Provider provider = Provider::kOpenAi;
  std::string endpoint;  ///< e.g. https://api.openai.com/v1
  std::string model;
  std::string api_key;  ///< from the environment variable named in config
  ModelPrice price{};   ///< USD per million tokens; a judge needs one to start
  double usd_to_eur = 0.92;
  double daily_limit_eur = 0;  ///< this judge's cap, € per local day (0 = none apart from global)
  double global_daily_limit_eur = 0;  ///< the shared cap, € per local day
  std::string timezone = "UTC";       ///< day boundary of the caps (IANA name)
  int max_tokens = 300;               ///< reply cap sent to the API
  std::int64_t max_input_tokens = 16000;
  Millis timeout{30'000};  ///< per attempt
  int max_in_flight = 8;
  /// Reserved calls waiting for a slot; beyond it new calls end at once as rate_limited (local
  /// back-pressure: a slow provider must not grow memory without bound).
  std::size_t max_waiting = 10000;
  double requests_per_minute = 0;  ///< 0 = no limit
  double tokens_per_minute = 0;    ///< 0 = no limit (prompt estimate + max_tokens per call)
  RetryOptions retry;
  int breaker_failures = 5;
  Millis breaker_open{30'000};
};

struct LlmCallResult {
  LlmVerdict verdict;
  TokenUsage usage;            ///< tokens charged (reported, or the estimate)
  bool usage_reported = true;  ///< false: the reply had no usage; the estimate was charged
  double cost_usd = 0, cost_eur = 0;
  Millis latency{0};  ///< from judge() to the result, waits included
  int attempts = 0;   ///< HTTP attempts made
  bool contexts_truncated = false;
  std::string exhausted_scope;     ///< skipped_budget because this scope's cap was reached
  bool store_unavailable = false;  ///< skipped_budget because the budget store did not answer
};

class LlmJudge {
 public:
  /// `client` and `budget` must outlive the judge; both are shared with other judges.
  LlmJudge(LlmJudgeSettings settings, HttpClient& client, BudgetStore& budget);
  ~LlmJudge();

  /// Judges `event` (copied); `done` runs exactly once, on the HTTP client's thread (or on the
  /// caller's thread for outcomes decided before any call: no_context, context_too_long,
  /// skipped_budget). Thread-safe.
  void judge(const Event& event, std::function<void(LlmCallResult)> done);

  const LlmJudgeSettings& settings() const { return settings_; }
  int inFlight() const;

 private:
  struct Call;
  static constexpr Millis kMaxBudgetWait{60'000};  ///< longest wait for in-flight holds
  static constexpr Millis kBusyPoll{250};          ///< when the holds are another daemon's
  /// Reserves and starts (or queues) the call, or finishes it with skipped_budget. Returns the
  /// reservation status; kBusy means the call was queued again (front when `from_queue`).
  ReserveStatus reserveThenStart(std::shared_ptr<Call> call, bool from_queue);
  void finishEarly(const std::shared_ptr<Call>& call, LlmOutcome o, std::string why,
                   std::string scope = {}, bool store_unavailable = false);
  void start(std::shared_ptr<Call> call);
  void attempt(std::shared_ptr<Call> call);
  void onResponse(std::shared_ptr<Call> call, HttpResponse response);
  void finish(std::shared_ptr<Call> call, LlmVerdict verdict, std::optional<TokenUsage> usage);
  std::vector<ScopeLimit> scopes() const;

  LlmJudgeSettings settings_;
  HttpClient& client_;
  BudgetStore& budget_;
  mutable std::mutex mu_;  // guards everything below
  RetryPolicy policy_;
  CircuitBreaker breaker_;
  std::optional<TokenBucket> rpm_, tpm_;
  int in_flight_ = 0;
  std::deque<std::shared_ptr<Call>> waiting_;         // reserved, waiting for a slot
  std::deque<std::shared_ptr<Call>> budget_waiting_;  // "busy": retried when a call finishes
  std::atomic<std::uint64_t> sequence_{0};
};

}  // namespace assay::llm
