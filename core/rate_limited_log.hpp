#pragma once
/// At most 5 log lines per minute for one kind of data-path failure; the first line of the next
/// minute says how many were held back (every one is counted in a metric anyway).

#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <string>
#include <utility>

namespace assay {

class RateLimitedLog {
 public:
  /// True when the caller may log; `suppressed` is then the number held back since.
  bool allow(long& suppressed) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    if (now - window_start_ > std::chrono::minutes(1)) window_start_ = now, count_ = 0;
    if (++count_ > 5) {
      ++suppressed_;
      return false;
    }
    suppressed = std::exchange(suppressed_, 0);
    return true;
  }
  /// Held back since the last line that was logged.
  long pendingSuppressed() {
    std::lock_guard lock(mu_);
    return suppressed_;
  }
  /// " (n similar message(s) suppressed before this one)", or "" for n = 0.
  static std::string note(long n) {
    return n ? fmt::format(" ({} similar message(s) suppressed before this one)", n) : "";
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
  int count_ = 0;
  long suppressed_ = 0;
};

}  // namespace assay
