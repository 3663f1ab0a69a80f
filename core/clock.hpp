#pragma once
/// Wall-clock time as assay records it: Unix epoch milliseconds (UTC) for judgments, budget
/// days, leases, batches and A/B decisions, and the seconds-resolution UTC text of logs and
/// reports. The one definition: every subsystem reads the time through it.

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace assay {

/// Now, as Unix epoch milliseconds (system_clock: may step with the system's time).
inline std::int64_t epochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Now, as Unix epoch seconds with a fraction (process_start_time_seconds and the like).
inline double epochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// A steady-clock time point (now by default) as nanoseconds since the clock's epoch: what an
/// atomic holds when another thread reads how long ago something happened. Not a wall time.
inline std::int64_t steadyNs(
    std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// `ms` (Unix epoch milliseconds) as RFC 3339 UTC to the second: "2026-12-04T20:30:12Z".
inline std::string utcSeconds(std::int64_t ms) {
  const auto t = static_cast<time_t>(ms / 1000);
  tm parts{};
  gmtime_r(&t, &parts);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return buf;
}

}  // namespace assay
