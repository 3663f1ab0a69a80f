#include "judges/llm/retry.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <string>

namespace assay::llm {
namespace {

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int monthIndex(std::string_view m) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i)
    if (kMonths[i] == m) return i;
  return -1;
}

bool parseHms(std::string_view s, std::tm& tm) {
  if (s.size() != 8 || s[2] != ':' || s[5] != ':') return false;
  auto num = [&](std::size_t at, int& out) {
    return std::from_chars(s.data() + at, s.data() + at + 2, out).ec == std::errc();
  };
  return num(0, tm.tm_hour) && num(3, tm.tm_min) && num(6, tm.tm_sec) && tm.tm_hour < 24 &&
         tm.tm_min < 60 && tm.tm_sec <= 60;
}

std::optional<std::time_t> parseHttpDate(std::string_view v) {
  // Split on spaces (collapsing runs: asctime pads the day with a space).
  std::array<std::string_view, 8> f{};
  std::size_t n = 0;
  for (std::size_t i = 0; i < v.size() && n < f.size();) {
    while (i < v.size() && v[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < v.size() && v[i] != ' ') ++i;
    if (i > start) f[n++] = v.substr(start, i - start);
  }
  std::tm tm{};
  int day = 0, year = 0;
  auto toInt = [](std::string_view s, int& out) {
    return allDigits(s) && std::from_chars(s.data(), s.data() + s.size(), out).ec == std::errc();
  };
  if (n == 6 && f[5] == "GMT" && f[0].size() == 4 && f[0][3] == ',') {
    // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
    if (!toInt(f[1], day) || (tm.tm_mon = monthIndex(f[2])) < 0 || !toInt(f[3], year) ||
        f[3].size() != 4 || !parseHms(f[4], tm))
      return std::nullopt;
  } else if (n == 4 && f[3] == "GMT" && !f[0].empty() && f[0].back() == ',') {
    // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT (two-digit year: RFC 9110 says ≥ 50 years ahead
    // means the past century)
    const std::string_view d = f[1];
    if (d.size() != 9 || d[2] != '-' || d[6] != '-' || !toInt(d.substr(0, 2), day) ||
        (tm.tm_mon = monthIndex(d.substr(3, 3))) < 0 || !toInt(d.substr(7, 2), year) ||
        !parseHms(f[2], tm))
      return std::nullopt;
    year += year < 70 ? 2000 : 1900;
  } else if (n == 5) {
    // asctime: Sun Nov  6 08:49:37 1994
    if ((tm.tm_mon = monthIndex(f[1])) < 0 || !toInt(f[2], day) || !parseHms(f[3], tm) ||
        !toInt(f[4], year))
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (day < 1 || day > 31 || year < 1970 || year > 9999) return std::nullopt;
  tm.tm_mday = day;
  tm.tm_year = year - 1900;
  return timegm(&tm);
}

}  // namespace

std::optional<Millis> parseRetryAfter(std::string_view value, WallClock::time_point now) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (allDigits(value)) {
    // More than 12 digits is more than 31,000 years: as long a wait as 12 nines (the caller
    // gives up), not a value to ignore.
    std::int64_t secs = 999'999'999'999;
    if (value.size() <= 12 &&
        std::from_chars(value.data(), value.data() + value.size(), secs).ec != std::errc())
      return std::nullopt;
    return Millis{secs * 1000};
  }
  const auto when = parseHttpDate(value);
  if (!when) return std::nullopt;
  // In seconds: system_clock counts nanoseconds, which overflow after the year 2262, and
  // a date may say 9999 (found by fuzz/retry_after_fuzz.cpp).
  const auto now_s = std::chrono::floor<std::chrono::seconds>(now);
  const std::int64_t delta_s = static_cast<std::int64_t>(*when) - now_s.time_since_epoch().count();
  const auto sub_second = std::chrono::floor<Millis>(now - now_s);  // now's fraction of a second
  if (delta_s <= 0) return Millis{0};
  return Millis{delta_s * 1000} - sub_second;
}

bool isRetryable(const AttemptResult& r) {
  if (r.permanent) return false;
  if (r.status == 0 || r.timed_out || r.overloaded) return true;
  switch (r.status) {
    case 408:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
    case 529:
      return true;
    default:
      return false;
  }
}

RetryPolicy::RetryPolicy(RetryOptions options, std::uint64_t seed)
    : options_(options), rng_(seed) {}

RetryDecision RetryPolicy::decide(int attempts_made, const AttemptResult& last) {
  const bool rate = last.status == 429 || last.status == 529 || last.overloaded;
  const Outcome outcome = rate             ? Outcome::kRateLimited
                          : last.timed_out ? Outcome::kTimeout
                                           : Outcome::kProviderError;
  if (!isRetryable(last)) return {false, Millis{0}, Outcome::kProviderError};
  if (last.retry_after && *last.retry_after > options_.max_retry_wait)
    return {false, Millis{0}, Outcome::kRateLimited};  // asked to wait too long: give up now
  if (attempts_made >= options_.max_attempts) return {false, Millis{0}, outcome};
  const int exponent = std::min(attempts_made - 1, 30);
  const double ceiling =
      std::min(static_cast<double>(options_.max_delay.count()),
               static_cast<double>(options_.base_delay.count()) * std::ldexp(1.0, exponent));
  std::uniform_real_distribution<double> jitter(0.0, ceiling);
  Millis wait{static_cast<std::int64_t>(jitter(rng_))};
  if (last.retry_after) wait = std::max(wait, *last.retry_after);
  if (wait > options_.max_retry_wait) return {false, Millis{0}, outcome};
  return {true, wait, outcome};
}

CircuitBreaker::CircuitBreaker(int failure_threshold, Millis open_for, Millis max_open_for)
    : threshold_(std::max(1, failure_threshold)),
      base_open_(open_for),
      max_open_(std::max(open_for, max_open_for)),
      current_open_(open_for) {}

bool CircuitBreaker::allow(Instant now) {
  if (!open_) return true;
  if (now < open_until_ || probe_in_flight_) return false;
  probe_in_flight_ = true;  // half-open: this caller is the probe
  return true;
}

void CircuitBreaker::onSuccess() {
  consecutive_failures_ = 0;
  open_ = probe_in_flight_ = false;
  current_open_ = base_open_;
}

void CircuitBreaker::onFailure(Instant now) {
  if (open_ && probe_in_flight_) {  // the probe failed: open again, for longer
    probe_in_flight_ = false;
    current_open_ = std::min(max_open_, current_open_ * 2);
    open_until_ = now + current_open_;
    return;
  }
  if (++consecutive_failures_ >= threshold_ && !open_) {
    open_ = true;
    open_until_ = now + current_open_;
  }
}

CircuitBreaker::State CircuitBreaker::state(Instant now) const {
  if (!open_) return State::kClosed;
  return (now < open_until_ && !probe_in_flight_) ? State::kOpen : State::kHalfOpen;
}

Millis CircuitBreaker::reopensIn(Instant now) const {
  if (!open_ || probe_in_flight_ || now >= open_until_) return Millis{0};
  return std::chrono::ceil<Millis>(open_until_ - now);
}

TokenBucket::TokenBucket(double per_minute, double burst, Instant now)
    : per_ms_(per_minute / 60000.0), burst_(burst), level_(burst), last_(now) {}

void TokenBucket::refill(Instant now) {
  if (now > last_) {
    const double ms = std::chrono::duration<double, std::milli>(now - last_).count();
    level_ = std::min(burst_, level_ + ms * per_ms_);
    last_ = now;
  }
}

double TokenBucket::available(Instant now) {
  refill(now);
  return level_;
}

Millis TokenBucket::take(double amount, Instant now) {
  refill(now);
  const double need = std::min(amount, burst_);  // an oversized request waits for a full bucket
  if (level_ >= need) {
    level_ -= amount;
    return Millis{0};
  }
  if (per_ms_ <= 0) return Millis::max();
  return Millis{static_cast<std::int64_t>(std::ceil((need - level_) / per_ms_))};
}

}  // namespace assay::llm
