#include "core/service_notify.hpp"

#include <systemd/sd-daemon.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace assay::service {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_ready{false};
std::atomic<std::int64_t> g_last_ping_ns{0};

/// A quarter of WATCHDOG_USEC in nanoseconds, or 0 without a watchdog (read once).
std::int64_t pingIntervalNs() {
  static const std::int64_t interval = [] {
    std::uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 ? static_cast<std::int64_t>(usec) * 1000 / 4
                                             : std::int64_t{0};
  }();
  return interval;
}

void send(const std::string& state) {
  if (supervised()) sd_notify(0, state.c_str());
}

}  // namespace

bool supervised() {
  static const bool yes = std::getenv("NOTIFY_SOCKET") != nullptr;
  return yes;
}

void ready(const std::string& status_line) {
  if (!g_ready.exchange(true))
    send("READY=1\nSTATUS=" + status_line);
  else
    status(status_line);
}

void status(const std::string& status_line) { send("STATUS=" + status_line); }

void stopping() { send("STOPPING=1\nSTATUS=stopping: draining, flushing, committing"); }

void watchdog() {
  const std::int64_t interval = pingIntervalNs();
  if (interval == 0) return;
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  std::int64_t last = g_last_ping_ns.load();
  if (now - last < interval || !g_last_ping_ns.compare_exchange_strong(last, now)) return;
  sd_notify(0, "WATCHDOG=1");
}

}  // namespace assay::service
