#pragma once
/// One LLM judge (`kind: llm`, a judge of the table in judges/registry.cpp): a criterion's rubric,
/// one provider endpoint and model, a daily budget. Its options are documented in
/// docs/configuration.md ("LLM judges"), parsed in llm_options.cpp; its scale is its rubric's.
/// It turns an event into a verdict without ever blocking the caller (the ledger's Redis round
/// trips run on the ledger's thread, the HTTP exchange on the client's):
///   no contexts for a context rubric → no_context; prompt over max_input_tokens even without
///   contexts → context_too_long (no call) → reserve the worst case (prompt estimate +
///   max_tokens, priced) in the budget scopes "global" and "judge:<name>" → skipped_budget when
///   the day's cap is reached (then closed for the day, for every daemon) or when the store does
///   not answer (fail closed); when only the reservations of calls in flight stand in the way,
///   wait until they settle → wait for a slot (max_in_flight)
///   and the rate limits (requests and tokens per minute) → call, retrying 429/5xx/529/timeouts
///   with capped full-jitter backoff and Retry-After as a floor (retry.hpp), behind a circuit
///   breaker → parse the verdict (verdict.hpp; a faithfulness score from trimmed contexts is
///   contexts_trimmed unless score_trimmed) → settle the reservation with the reported usage
///   (or the conservative estimate when the reply has none), or release it when no call was
///   answered; the verdict is handed on once the ledger has recorded that. Failures are
///   outcomes, never scores.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/event.hpp"
#include "core/rate_limited_log.hpp"
#include "judges/judge.hpp"
#include "judges/llm/call_services.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/ledger.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/provider.hpp"
#include "judges/llm/retry.hpp"
#include "judges/llm/rubric.hpp"
#include "judges/llm/verdict.hpp"

namespace assay::llm {

/// The model family of a model name, for the self-judging count (assay_judge_self_judging_total:
/// a judge prefers answers of its own family; Panickssery et al., "LLM Evaluators Recognize and
/// Favor Their Own Generations", NeurIPS 2024). Case-insensitive, after any "vendor/" prefix:
/// OpenAI's chat models ("gpt-3.5*", "gpt-4*", "gpt-5*", "gpt-oss*", "chatgpt*", "o1*", "o3*",
/// "o4*") are "openai"; "claude*", "gemini*", "llama*", "qwen*", "deepseek*" their own; Mistral's
/// ("mistral*", "mixtral*", "ministral*", "codestral*") "mistral"; any other name its first word
/// ("gpt2", "t5", "gpt" for "gpt-j-6b"), so that GPT-2 and EleutherAI's GPT-J are not OpenAI's.
std::string modelFamily(std::string_view model);

struct LlmJudgeSettings {
  std::string name;     ///< configured judge name (budget scope "judge:<name>")
  std::string version;  ///< its version id (JudgeContext::version): its series' judge_version
  Rubric rubric;        ///< criterion, levels, examples
  Provider provider = Provider::kOpenAi;
  std::string endpoint;  ///< e.g. https://api.openai.com/v1
  std::string model;
  std::string api_key;  ///< from the environment variable named in config
  std::string ca_file;  ///< PEM bundle of a private CA ("" = the system store)
  /// A plain http:// endpoint on a host other than loopback is refused unless this is set
  /// (then a warning at start): the API key and the events' text would travel unencrypted.
  bool insecure_http = false;
  ModelPrice price{};  ///< USD per million tokens; a judge needs one to start
  double usd_to_eur = 0.92;
  double daily_limit_eur = 0;  ///< this judge's cap, € per local day (0 = none apart from global)
  double global_daily_limit_eur = 0;  ///< the shared cap, € per local day
  /// budget.tenants / budget.apps (BudgetOptions): per-tenant and per-app caps, "*" = any other.
  std::vector<std::pair<std::string, double>> tenant_caps, app_caps;
  std::string timezone = "UTC";  ///< day boundary of the caps (IANA name)
  int max_tokens = 300;          ///< reply cap sent to the API
  std::int64_t max_input_tokens = 16000;
  /// How the reply is constrained: kJsonSchema (default) sends the rubric's reply schema
  /// (replySchema(), prompt.hpp) as OpenAI `json_schema` strict / Anthropic forced tool;
  /// kJsonObject is JSON mode (OpenAI `json_object`; Anthropic: the prompt's rule only), for
  /// servers and models without schema support. Config `reply_format`.
  ReplyFormat::Kind reply_format = ReplyFormat::Kind::kJsonSchema;
  /// Count a score of a `needs_every_context` rubric (faithfulness) judged on trimmed contexts as
  /// a score; false (default): such a verdict is the outcome `contexts_trimmed`, kept out of the
  /// statistics. Config `score_trimmed`.
  bool score_trimmed = false;
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
  /// How long an open breaker holds a call (counted from the call's start) before ending it as
  /// provider_error; 0 = no hold (calls end at once). The option `breaker_max_hold_ms`
  /// (default 240 s, at most timeout + max_retry_wait × max_attempts so that a held call stays
  /// within its lease) under limits.when_full: block; always 0 under drop_newest. A held call
  /// keeps its max_in_flight slot; the calls behind it wait for a slot, and give up at once
  /// when their own hold time has passed.
  Millis breaker_hold{0};
  /// `batch: true`: calls go through the provider's batch API (llm_batch.cpp) at the batch
  /// price (kBatchPriceShare of the list price): collected until batch_max_requests or
  /// batch_max_wait after the first, submitted, polled every batch_poll, settled per result.
  bool batch = false;
  std::size_t batch_max_requests = 1000;
  Millis batch_max_wait{600'000};
  Millis batch_poll{30'000};
  std::size_t batch_max_pending_events = 50'000;
};

/// The settings of `kind: llm` judge options (llm_options.cpp). Throws OptionError listing
/// every bad option. With `context.services == nullptr` the API key variable is not read (a
/// warning says when it is unset); otherwise an unset variable is an error.
LlmJudgeSettings llmSettingsFrom(const JudgeOptionValues& values, const JudgeContext& context);

/// The justification of `context_too_long` for `rubric`: what did not fit without contexts.
std::string tooLongText(const Rubric& rubric);

/// The reply format of the judge's calls: its rubric's reply schema (replySchema, named
/// "verdict") under `reply_format: json_schema`, or JSON mode.
ReplyFormat replyFormatOf(const LlmJudgeSettings& s);

/// True for an `http://` URL whose host is not loopback (localhost, 127.0.0.0/8, [::1]).
bool isPlainRemoteHttp(std::string_view endpoint);

struct LlmCallResult {
  LlmVerdict verdict;
  TokenUsage usage;            ///< tokens charged (reported, or the estimate)
  bool usage_reported = true;  ///< false: the reply had no usage; the estimate was charged
  double cost_usd = 0, cost_eur = 0;
  Millis latency{0};  ///< from call() to the result, waits included
  int attempts = 0;   ///< HTTP attempts made
  /// The attempts' HttpResponse::on_wire, summed: the provider's time and the round trips.
  std::chrono::nanoseconds on_wire{0};
  bool contexts_truncated = false;
  std::string exhausted_scope;     ///< skipped_budget because this scope's cap was reached
  double exhausted_cap_eur = 0;    ///< that scope's cap (€/day) when the store refused the call
  bool store_unavailable = false;  ///< skipped_budget because the budget store did not answer
  /// The event was delivered again: its verdict comes from the verdict store (no call, no
  /// charge, no tokens).
  bool from_store = false;
};

/// Whether an LlmJudge still lives, and how many of its batch callbacks run now (ifAlive,
/// llm_call.hpp): ~LlmJudge closes it and waits for those running on other threads.
class JudgeLife {
 public:
  class Active {
   public:
    explicit Active(JudgeLife& l);
    ~Active();
    explicit operator bool() const { return entered_; }
    Active(const Active&) = delete;
    Active& operator=(const Active&) = delete;

   private:
    JudgeLife& life_;
    bool entered_ = false;
  };
  /// No callback starts after it; returns once those running on other threads ended.
  void close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool alive_ = true;
  int active_ = 0;
};

class LlmBatch;

class LlmJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  /// The judge of these options, its HTTP client and ledger from `context.services`; nullptr
  /// when the context has no services (the options are only checked). Throws OptionError.
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values,
                                       const JudgeContext& context);
  /// The criterion and scale of the rubric `values` choose.
  static JudgeInfo info(const JudgeOptionValues& values);

  /// `services` must outlive the judge; the judge registers its scope and series there. The
  /// judge must outlive its calls: destroy it once the services' threads are stopped, or once
  /// every call's `done` has run (`done` is the last thing a call does with the judge).
  LlmJudge(LlmJudgeSettings settings, CallServices& services);
  ~LlmJudge() override;

  /// Blocks until the verdict (tools and tests).
  Verdict judge(const Event& event) const override;
  /// The daemon's entry point: `done` runs once with the verdict (model, tokens, cost and
  /// evidence filled in), on the ledger's or HTTP client's thread, or on the caller's for
  /// outcomes decided before any call. Counts tokens, cost, usage_missing and self-judging.
  void judgeAsync(const Event& event, VerdictCallback done) const override;

  /// The same call with every detail of its accounting (tests, benchmarks).
  void call(const Event& event, std::function<void(LlmCallResult)> done) const;

  /// How long the judge may go without a verdict while calls are outstanding, when it works:
  /// twice the longest call (timeout × max_attempts + max_retry_wait × (max_attempts − 1) +
  /// the 60 s budget wait + breaker_hold), at least 5 minutes (1,200 s with the defaults, 720 s
  /// without a hold); with `batch: true`,
  /// batch_max_wait + the providers' 24 h completion window + two polls + 1 hour.
  std::optional<std::chrono::seconds> maxSilence() const override;

  const LlmJudgeSettings& settings() const { return settings_; }
  int inFlight() const;

  /// A call that holds a reservation and never got its answer (the services stopped).
  struct Abandoned {
    std::string reservation_id, day, event_id;
    std::vector<ScopeLimit> scopes;
  };
  /// Once the services' threads are stopped: the calls abandoned with a reservation (waiting
  /// for a slot, or in flight), forgotten here; CallServices releases their reservations and
  /// drops their leases, so that their redelivered events are judged again.
  std::vector<Abandoned> abandon() const;

  /// One call's state (llm_call.hpp, internal to llm_judge.cpp and llm_batch.cpp).
  struct Call;

 private:
  static constexpr Millis kMaxBudgetWait{60'000};  ///< longest wait for in-flight holds
  static constexpr Millis kBusyPoll{250};          ///< when the holds are another daemon's
  /// Asks the ledger for the call's reservation; onReserved() goes on from its answer.
  /// `chain`: a call taken from budget_waiting_ that passes the turn to the next one.
  void reserve(const std::shared_ptr<Call>& call, bool chain) const;
  /// `settles`: settles_ when the reservation was asked for.
  void onReserved(const std::shared_ptr<Call>& call, const ReserveAnswer& answer, bool chain,
                  std::uint64_t settles) const;
  /// Retries the reservation of the first call waiting for budget held by calls in flight.
  void retryBudgetWaiting() const;
  void finishEarly(const std::shared_ptr<Call>& call, Outcome o, std::string why,
                   std::string scope = {}, bool store_unavailable = false) const;
  void start(const std::shared_ptr<Call>& call) const;
  void attempt(const std::shared_ptr<Call>& call) const;
  /// With the breaker open: how long to hold `call` before its next attempt (it becomes held),
  /// or nullopt when it may not be held (no breaker_hold, a batch call, its hold time passed:
  /// then it is no longer held and counted gave_up). Takes mu_.
  std::optional<Millis> holdFor(const std::shared_ptr<Call>& call) const;
  void onResponse(const std::shared_ptr<Call>& call, HttpResponse response) const;
  /// "HTTP 401 type/code: message" (the key redacted) or the connection error.
  std::string failureText(const HttpResponse& res, const ProviderReply& reply) const;
  /// A failed call, logged (at most 5 lines a minute per judge; every one is counted in
  /// assay_judge_runs_total{outcome}): an authentication failure as an error.
  void logFailure(Outcome outcome, const std::string& why) const;
  void finish(const std::shared_ptr<Call>& call, LlmVerdict verdict,
              std::optional<TokenUsage> usage) const;
  /// A score judged on trimmed contexts by a rubric that needs every context → the outcome
  /// contexts_trimmed (the score moved into the justification), unless score_trimmed.
  void flagTrimmed(const Prompt& prompt, LlmVerdict& verdict) const;
  /// Frees the call's slot (starting the next waiting call) once its money is recorded.
  void settled(const std::shared_ptr<Call>& call, LlmCallResult result) const;
  /// The ledger's end of a call: `cost_eur` and `verdict` for a billed answer, else nullopt.
  /// Written into the call's own FinishRequest (its buffers kept), which it returns.
  const FinishRequest& endOf(const std::shared_ptr<Call>& call, std::optional<double> cost_eur,
                             std::optional<std::string> verdict) const;
  /// call() and judgeAsync(): the one of `done` and `verdict_done` that is set gets the result.
  void begin(const Event& event, std::function<void(LlmCallResult)> done,
             VerdictCallback verdict_done) const;
  /// Hands `r` to whichever of the two callbacks is set (moved out first), as a Verdict to
  /// `verdict_done` (toVerdict()).
  void deliver(std::function<void(LlmCallResult)>& done, VerdictCallback& verdict_done,
               LlmCallResult r) const;
  /// judgeAsync()'s verdict of a call's result; counts its tokens, cost, usage_missing, stored
  /// verdict and store error, and ends its pending count.
  Verdict toVerdict(const LlmCallResult& r) const;
  /// The budget scopes a call on `event` reserves in: "global", "judge:<name>" when the judge
  /// has a cap, "tenant:<t>" and "app:<a>" when budget.tenants / budget.apps give the event's
  /// one a cap (t, a: the event's, "none" when empty, at most 128 bytes). A tenant or app
  /// capped by "*" gets its budget series on first use (at most kMaxScopeSeries of them).
  /// Into `out`, assigned in place (its capacity kept).
  void scopes(const Event& event, std::vector<ScopeLimit>& out) const;
  /// "global", and "judge:<name>" when the judge has a cap.
  std::vector<ScopeLimit> baseScopes() const;
  void baseScopes(std::vector<ScopeLimit>& out) const;  ///< the same, assigned in place
  static constexpr std::size_t kMaxScopeSeries = 200;
  void warnSelfJudging(const Event& event) const;

  const LlmJudgeSettings settings_;
  const std::string endpoint_shown_;  ///< settings_.endpoint for logs and judgments (safeUrl)
  const ReplyFormat format_;  ///< the reply format sent with every call (settings_.reply_format)
  /// The prompt's and the request's fixed parts, built once (the same bytes for every event).
  const std::string system_prompt_;
  const RequestTemplate request_;
  CallServices& services_;
  HttpClient& client_;
  Ledger& ledger_;
  const LlmStats::Judge stats_;
  // The state of calls in flight (not the judge's configuration): guarded by mu_.
  mutable std::mutex mu_;
  mutable RetryPolicy policy_;
  mutable CircuitBreaker breaker_;
  mutable RateLimitedLog failure_log_;
  mutable std::optional<TokenBucket> rpm_, tpm_;
  mutable int in_flight_ = 0;
  /// Calls settled so far (guarded by mu_): a reservation refused as busy retries at once when
  /// one settled after it was asked for, instead of waiting for the next (with the ledger
  /// inline, that settlement can run between the store's answer and the wait).
  mutable std::uint64_t settles_ = 0;
  mutable int held_ = 0;                               // calls an open breaker holds (breaker_hold)
  mutable std::string last_failure_;                   // the endpoint's last failure (failureText)
  mutable std::deque<std::shared_ptr<Call>> waiting_;  // reserved, waiting for a slot
  mutable std::deque<std::shared_ptr<Call>> budget_waiting_;  // "busy": retried as calls finish
  struct ReservedCalls;
  // Hold a reservation, not yet settled (llm_call.hpp): the calls themselves are its links.
  const std::unique_ptr<ReservedCalls> reserved_;
  mutable std::atomic<std::uint64_t> sequence_{0};
  mutable std::atomic<bool> self_warned_{false};
  // False once the judge is destroyed: a batch timer (the flush after batch_max_wait, the
  // periodic scan for batches to take over, a poll) outlives a judge that a reload rebuilt,
  // and must then do nothing (ifAlive, llm_call.hpp).
  std::shared_ptr<JudgeLife> alive_ = std::make_shared<JudgeLife>();
  // batch: true: the batch mode (llm_batch.hpp); null otherwise. Its state is guarded by mu_.
  std::unique_ptr<LlmBatch> batch_;
  friend class LlmBatch;
};

}  // namespace assay::llm
