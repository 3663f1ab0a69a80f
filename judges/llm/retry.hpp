#pragma once
/// Retry timing for LLM provider calls, separated from I/O so it is tested with a fake clock:
/// when to retry, how long to wait, when to give up, when to stop calling a failing endpoint,
/// and request/token rate limits. All times are std::chrono; the caller passes `now`.

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string_view>

#include "judges/llm/verdict.hpp"

namespace assay::llm {

using Millis = std::chrono::milliseconds;
using WallClock = std::chrono::system_clock;
using Instant = std::chrono::steady_clock::time_point;

/// Parses an HTTP `Retry-After` value (RFC 9110 §10.2.3): delay-seconds ("45"), or an HTTP-date
/// in IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), obsolete RFC 850 ("Sunday, 06-Nov-94
/// 08:49:37 GMT") or asctime ("Sun Nov  6 08:49:37 1994") form, relative to `now`. A date in the
/// past gives 0. nullopt for anything else (the header is then ignored).
std::optional<Millis> parseRetryAfter(std::string_view value, WallClock::time_point now);

struct RetryOptions {
  int max_attempts = 4;           ///< attempts in all, first included (≥ 1)
  Millis base_delay{500};         ///< backoff base
  Millis max_delay{20'000};       ///< backoff cap
  Millis max_retry_wait{60'000};  ///< a longer wait (Retry-After) gives up: rate_limited
};

/// What one attempt returned. `status` 0 = no HTTP response (connection failed or timed out).
struct AttemptResult {
  int status = 0;
  bool timed_out = false;
  bool overloaded = false;            ///< Anthropic `overloaded_error` body (HTTP 529)
  std::optional<Millis> retry_after;  ///< parsed Retry-After, if the response had one
  /// Retrying cannot help whatever the status: an exhausted quota (OpenAI 429
  /// `insufficient_quota`), a content-filter refusal, or a failure the provider billed.
  bool permanent = false;
};

/// Retryable: HTTP 408, 429, 500, 502, 503, 504, 529 (Anthropic "overloaded"), connection
/// failures and timeouts, unless `permanent`. Other 4xx (400 bad request, 401/403 auth, 404 model,
/// 413/422) are the request's fault: retrying cannot help.
bool isRetryable(const AttemptResult& r);

struct RetryDecision {
  bool retry = false;
  Millis wait{0};                             ///< when retry: sleep this long first
  Outcome give_up = Outcome::kProviderError;  ///< when !retry: the outcome to report
};

/// Capped exponential backoff with full jitter (Brooker, "Exponential Backoff And Jitter", AWS
/// Architecture Blog, 2015): wait = uniform(0, min(max_delay, base_delay · 2^(attempt−1))).
/// A Retry-After is honoured exactly as a floor — never retried earlier than asked; when it
/// exceeds max_retry_wait the call gives up at once with rate_limited instead of blocking.
class RetryPolicy {
 public:
  explicit RetryPolicy(RetryOptions options, std::uint64_t seed = 0x5eed);
  /// `attempts_made` ≥ 1: how many attempts have failed so far, the last being `last`.
  RetryDecision decide(int attempts_made, const AttemptResult& last);
  const RetryOptions& options() const { return options_; }

 private:
  RetryOptions options_;
  std::mt19937_64 rng_;
};

/// Stops calling an endpoint that keeps failing (Nygard, "Release It!", 2007). Closed: calls
/// pass; `failure_threshold` consecutive failures open it for `open_for`; then one probe call
/// is let through (half-open): success closes it, failure re-opens it for twice as long (up to
/// `max_open_for`). Failures are 5xx, connection errors and timeouts — not 4xx and not 429,
/// which are answers, not an endpoint down.
class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };
  CircuitBreaker(int failure_threshold = 5, Millis open_for = Millis{30'000},
                 Millis max_open_for = Millis{300'000});
  /// Whether a call may start now; in half-open state only the first caller gets true.
  bool allow(Instant now);
  void onSuccess();
  void onFailure(Instant now);
  State state(Instant now) const;
  /// Open: how long until a probe may go (0 once it may, or when closed or half-open).
  Millis reopensIn(Instant now) const;

 private:
  int threshold_;
  Millis base_open_, max_open_, current_open_;
  int consecutive_failures_ = 0;
  bool open_ = false, probe_in_flight_ = false;
  Instant open_until_{};
};

/// Token bucket for provider rate limits (requests per minute, tokens per minute): refills
/// continuously at `per_minute / 60 000` per millisecond up to `burst`. A request larger than
/// the burst may pass when the bucket is full (the bucket goes negative), so it is never stuck.
class TokenBucket {
 public:
  TokenBucket(double per_minute, double burst, Instant now);
  /// Takes `amount` and returns 0, or takes nothing and returns how long until it can.
  Millis take(double amount, Instant now);
  double available(Instant now);

 private:
  void refill(Instant now);
  double per_ms_, burst_, level_;
  Instant last_;
};

}  // namespace assay::llm
