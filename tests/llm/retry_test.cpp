#include "judges/llm/retry.hpp"

#include <doctest/doctest.h>

using namespace assay;
using namespace assay::llm;
using namespace std::chrono_literals;

namespace {
// A fixed "now" for the fake clock: 2026-11-29T13:42:05Z.
const WallClock::time_point kNow = WallClock::from_time_t(1795959725);
}  // namespace

TEST_CASE("Retry-After as delay-seconds and as HTTP-date, relative to a fake clock") {
  CHECK(parseRetryAfter("45", kNow) == Millis{45'000});
  CHECK(parseRetryAfter(" 0 ", kNow) == Millis{0});
  // 30 s ahead of kNow, in the three date forms of RFC 9110.
  CHECK(parseRetryAfter("Sun, 29 Nov 2026 13:42:35 GMT", kNow) == Millis{30'000});
  CHECK(parseRetryAfter("Sunday, 29-Nov-26 13:42:35 GMT", kNow) == Millis{30'000});
  CHECK(parseRetryAfter("Sun Nov 29 13:42:35 2026", kNow) == Millis{30'000});
  // A date in the past means "now".
  CHECK(parseRetryAfter("Sun, 29 Nov 2026 13:00:00 GMT", kNow) == Millis{0});
  // Dates past 2262 (where system_clock's nanoseconds overflow) up to 9999: a long wait, read
  // in seconds (fuzz/retry_after_fuzz.cpp found the overflow with "Sun Nov  6 08:49:37 8994").
  const auto far = parseRetryAfter("Sun Nov  6 08:49:37 8994", kNow);
  REQUIRE(far.has_value());
  // calendar.timegm((8994, 11, 6, 8, 49, 37)) - 1795959725, in ms (Python)
  CHECK(*far == Millis{219'886'859'252'000});
  CHECK(parseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", kNow).has_value());
  CHECK_FALSE(parseRetryAfter("Sat, 01 Jan 10000 00:00:00 GMT", kNow).has_value());
  // A fraction of a second in `now` is honoured (the wait is rounded up to the millisecond).
  CHECK(parseRetryAfter("Sun, 29 Nov 2026 13:42:35 GMT", kNow + std::chrono::microseconds{1500}) ==
        Millis{29'999});
  for (const char* bad :
       {"", "soon", "-5", "4.5", "Sun, 29 Nov 2026 13:42:35 CET", "Sun, 32 Nov 2026 13:42:35 GMT",
        "Sun, 29 Foo 2026 13:42:35 GMT", "Sun, 29 Nov 2026 25:42:35 GMT"}) {
    CAPTURE(bad);
    CHECK_FALSE(parseRetryAfter(bad, kNow).has_value());
  }
}

TEST_CASE("429 with Retry-After: 45 → the retry comes no sooner than 45 s later") {
  RetryPolicy policy(RetryOptions{});
  AttemptResult r;
  r.status = 429;
  r.retry_after = parseRetryAfter("45", kNow);
  const auto d = policy.decide(1, r);
  REQUIRE(d.retry);
  CHECK(d.wait >= 45s);
  const auto next_attempt = kNow + d.wait;
  CHECK(next_attempt - kNow >= 45s);
}

TEST_CASE("Retry-After as an HTTP date 30 s ahead → waits 30 s") {
  RetryPolicy policy(RetryOptions{});
  AttemptResult r;
  r.status = 503;
  r.retry_after = parseRetryAfter("Sun, 29 Nov 2026 13:42:35 GMT", kNow);
  const auto d = policy.decide(1, r);
  REQUIRE(d.retry);
  CHECK(d.wait >= 30s);
  CHECK(d.wait <= 30s);  // backoff ceiling for attempt 1 is 0.5 s, below the floor: exactly 30 s
}

TEST_CASE("Retry-After 600 s with max_retry_wait 60 000 ms → rate_limited without waiting") {
  RetryOptions o;
  o.max_retry_wait = 60'000ms;
  RetryPolicy policy(o);
  AttemptResult r;
  r.status = 429;
  r.retry_after = 600s;
  const auto d = policy.decide(1, r);
  CHECK_FALSE(d.retry);
  CHECK(d.wait == 0ms);
  CHECK(d.give_up == Outcome::kRateLimited);
}

TEST_CASE("full jitter stays within the capped exponential ceiling") {
  RetryOptions o;
  o.max_attempts = 20;
  o.base_delay = 100ms;
  o.max_delay = 2'000ms;
  RetryPolicy policy(o, 42);
  AttemptResult r;
  r.status = 502;
  for (int attempt = 1; attempt < 20; ++attempt) {
    const Millis ceiling = std::min<Millis>(2'000ms, 100ms * (1LL << std::min(attempt - 1, 20)));
    Millis max_seen{0};
    for (int i = 0; i < 200; ++i) {
      const auto d = policy.decide(attempt, r);
      REQUIRE(d.retry);
      CHECK(d.wait >= 0ms);
      CHECK(d.wait <= ceiling);
      max_seen = std::max(max_seen, d.wait);
    }
    CHECK(max_seen > ceiling / 2);  // jitter spreads over the range, not a fixed delay
  }
}

TEST_CASE("what is retried, and the outcome when attempts run out") {
  RetryOptions o;
  o.max_attempts = 3;
  RetryPolicy policy(o);
  for (int status : {400, 401, 403, 404, 413, 422}) {
    CAPTURE(status);
    AttemptResult r;
    r.status = status;
    const auto d = policy.decide(1, r);
    CHECK_FALSE(d.retry);
    CHECK(d.give_up == Outcome::kProviderError);
  }
  AttemptResult s503;
  s503.status = 503;
  CHECK(policy.decide(2, s503).retry);
  CHECK(policy.decide(3, s503).give_up == Outcome::kProviderError);
  CHECK_FALSE(policy.decide(3, s503).retry);
  AttemptResult timeout;
  timeout.timed_out = true;
  CHECK(policy.decide(1, timeout).retry);
  CHECK(policy.decide(3, timeout).give_up == Outcome::kTimeout);
  AttemptResult overloaded;
  overloaded.status = 529;
  overloaded.overloaded = true;
  CHECK(policy.decide(1, overloaded).retry);
  CHECK(policy.decide(3, overloaded).give_up == Outcome::kRateLimited);
  AttemptResult refused;  // connection refused: no status
  CHECK(policy.decide(1, refused).retry);
}

TEST_CASE("circuit breaker: opens after consecutive failures, probes, backs off") {
  const Instant t0{};
  CircuitBreaker cb(3, 10'000ms, 40'000ms);
  CHECK(cb.allow(t0));
  cb.onFailure(t0);
  cb.onFailure(t0);
  CHECK(cb.state(t0) == CircuitBreaker::State::kClosed);
  cb.onSuccess();  // a success resets the count
  cb.onFailure(t0);
  cb.onFailure(t0);
  CHECK(cb.allow(t0));
  cb.onFailure(t0);  // third in a row: open
  CHECK(cb.state(t0) == CircuitBreaker::State::kOpen);
  CHECK_FALSE(cb.allow(t0 + 9'999ms));
  CHECK(cb.allow(t0 + 10'000ms));        // the probe
  CHECK_FALSE(cb.allow(t0 + 10'001ms));  // only one probe at a time
  cb.onFailure(t0 + 10'500ms);           // probe failed: open for 20 s
  CHECK_FALSE(cb.allow(t0 + 30'000ms));
  CHECK(cb.allow(t0 + 30'500ms));
  cb.onFailure(t0 + 31'000ms);  // 40 s (the cap), not 80
  CHECK_FALSE(cb.allow(t0 + 70'999ms));
  CHECK(cb.allow(t0 + 71'000ms));
  cb.onSuccess();
  CHECK(cb.state(t0 + 71'000ms) == CircuitBreaker::State::kClosed);
  CHECK(cb.allow(t0 + 71'000ms));
}

TEST_CASE("token bucket: per-minute refill, waits, oversized requests") {
  const Instant t0{};
  TokenBucket rpm(60, 2, t0);  // one request a second, burst 2
  CHECK(rpm.take(1, t0) == 0ms);
  CHECK(rpm.take(1, t0) == 0ms);
  CHECK(rpm.take(1, t0) == 1'000ms);
  CHECK(rpm.take(1, t0 + 500ms) == 500ms);
  CHECK(rpm.take(1, t0 + 1'000ms) == 0ms);
  TokenBucket tpm(60'000, 10'000, t0);  // 1,000 tokens a second
  CHECK(tpm.take(8'000, t0) == 0ms);
  CHECK(tpm.take(5'000, t0) == 3'000ms);
  CHECK(tpm.take(25'000, t0 + 8'000ms) == 0ms);  // larger than the burst: passes when full
  CHECK(tpm.available(t0 + 8'000ms) == doctest::Approx(-15'000));
  CHECK(tpm.take(1, t0 + 8'000ms) == 15'001ms);
}

TEST_CASE("Retry-After past 12 digits: as long a wait as 12 nines, not ignored") {
  // A hostile trial's 23-digit value was read as no Retry-After at all: the call retried at once.
  CHECK(parseRetryAfter("99999999999999999999999", kNow) == Millis{999'999'999'999'000});
  CHECK(parseRetryAfter("999999999999", kNow) == Millis{999'999'999'999'000});
  CHECK(parseRetryAfter("1000000000000", kNow) == Millis{999'999'999'999'000});
}
