// LLM dispatch under load (docs/BENCHMARKS.md, section "LLM dispatch"): LlmJudge calls against
// the fake provider (tests/tools/fake_llm_server.cpp, plain HTTP on loopback) answering every
// call after a fixed 200 ms, with 1, 64 and 1,024 calls in flight. Every call goes the whole
// way: prompt, budget reservation and settlement (memory ledger: inline, on the caller's thread),
// the request on the one HTTP client thread, reply parsing. Each K is measured two ways, after one
// warm-up wave that opens the connections (and the fake server its thread per connection), which
// the later calls reuse, as a judge with max_in_flight K does:
//   steady  K calls kept in flight: the first K started evenly over one server delay, then
//           one new call per result, started from this thread (a judge fed continuously at its
//           max_in_flight), K * waves calls measured after that ramp; calls/s counted while all
//           K in flight are measured ones. This is the figure the target is about. At 1,024 in
//           flight this thread looks for results every millisecond (about 5 come in one) and
//           starts as many calls: woken by each result instead, its own futex wake-ups and
//           context switches were counted below as ours (the same code measured 135-141 us of
//           CPU per call that way, 97-100 us polling; two runs each). At 1 and 64 in flight
//           each result wakes it.
//   burst   waves of K calls submitted at once and awaited: the K replies come back together,
//           so the last one waits for the K - 1 before it on the client thread; its p99 is
//           the time to drain a burst (about K * the client thread's cost per reply), not a
//           call's own cost.
//   added latency = (call() to result) - the time on the wire (LlmCallResult::on_wire: from the
//                   request's last byte written to the reply's last byte read, on the client's
//                   clock): what assay adds, the fake server's delay and handling and the
//                   loopback round trip excluded;
//   memory per call = (resident set with K in flight, sampled 120 ms into the warm-up wave)
//                   - (resident set before it), / K: sockets, buffers, the pending call's state.
//   CPU per call  = user + system time over the steady calls (the ramp's included), / their
//                   number: this process
//                   (judge, ledger and HTTP client threads) and the fake server's;
//   allocations per call = operator new calls of this process over the steady calls / their
//                   number; allocations_on_request_path = those of the driver's thread inside
//                   LlmJudge::call over the measured steady calls (prompt, request body,
//                   reservation in the inline ledger, hand-off to the client thread; not the
//                   client thread's write).
// Prints one JSON object per K on stdout (log lines go to stderr); asserts nothing (a call that
// does not end `ok` is counted in "failed").
//   usage: assay_llm_dispatch_bench [--waves N] [--only 1|64|1024]

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../llm/fake_server.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/llm_judge.hpp"

using namespace assay;
using namespace assay::llm;
using Clock = std::chrono::steady_clock;

/// Every operator new of this process (the judge, ledger and HTTP client threads and this
/// driver), counted: allocations per call. The C libraries' own mallocs (OpenSSL, libc) are not.
std::atomic<long> g_allocations{0};
/// Those of this thread only: the driver's calls to LlmJudge::call, where a call's request path
/// runs (prompt, request body, budget reservation with the inline ledger, the hand-off to the
/// HTTP client thread) when a max_in_flight slot is free.
thread_local long t_allocations = 0;

// The replacements below pair malloc with free; GCC, seeing them inlined into the library's
// deallocations, takes them for a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

constexpr double kServerDelayMs = 200;

/// Resident set size in KiB (/proc/self/status VmRSS), 0 when unreadable.
long rssKib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

/// CPU time (user + system) of this process, seconds.
double selfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/// CPU time (user + system) of process `pid`, seconds (/proc/PID/stat fields 14 and 15, in
/// clock ticks); 0 when unreadable.
double processCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state (3) .. cmajflt (13)
  long utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// What one way of measuring a level K gave.
struct Measured {
  std::vector<double> added_ms;  // per call answered ok
  double allocations = 0;        // operator new calls per call, this process
  // Those made on the driver's thread inside LlmJudge::call, and the measured calls: the
  // request path's (allocations_on_request_path).
  long request_allocations = 0, requests = 0;
  long failed = 0;
  double calls_per_s = 0;
  double client_cpu_us = 0, server_cpu_us = 0;  // CPU per call: this process, the fake server
};

/// Makes the calls' events (unique ids) and starts them; the callbacks reference `this`.
class Caller {
 public:
  explicit Caller(const LlmJudge& judge) : judge_(judge) {
    base_.question = "How long is the warranty?";
    base_.answer = "The warranty lasts two years and covers water damage [1].";
    base_.contexts.push_back(
        Context{"1", std::string(1500, 'w') + " The warranty lasts two years.", ""});
  }

  /// Starts one call, counted in `*out` unless null (a warm-up or ramp call); every result is
  /// counted in finished_.
  void start(Measured* out) {
    // The same event with a new id, written in place: the driver allocates nothing per call.
    char id[32];
    const int n = std::snprintf(id, sizeof id, "dispatch-%ld", next_id_++);
    base_.id.assign(id, static_cast<std::size_t>(n));
    const auto started = Clock::now();
    std::function<void(LlmCallResult)> done = [this, started, out](LlmCallResult r) {
      const auto now = Clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - started).count();
      std::lock_guard lock(mu_);
      if (out) {
        if (r.verdict.outcome == Outcome::kOk)
          out->added_ms.push_back(ms -
                                  std::chrono::duration<double, std::milli>(r.on_wire).count());
        else
          ++out->failed;
      }
      finish_times_.push_back(now);
      // While the driver polls, it is woken only when a wait's target is reached: a futex
      // wake-up per call is the driver's cost, not ours.
      if (++finished_ == notify_at_ || !polling_) cv_.notify_one();
    };
    const long allocations_before = t_allocations;  // the driver's own callback excluded
    judge_.call(base_, std::move(done));
    if (out) {
      out->request_allocations += t_allocations - allocations_before;
      ++out->requests;
    }
    ++started_;
  }

  /// Waits until `n` results in all (exits the process after 60 s without one).
  void waitFinished(long n) {
    std::unique_lock lock(mu_);
    notify_at_ = n;
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return finished_ >= n; })) {
      std::fprintf(stderr, "llm_dispatch_bench: %ld call(s) unanswered after 60 s\n",
                   n - finished_);
      std::_Exit(1);  // the callbacks still reference this frame: no unwinding
    }
  }

  /// Results so far: polling, after sleeping until `until` or for a millisecond, whichever
  /// is first; otherwise once one more than `seen` arrived, or at `until`.
  long finishedAfter(long seen, Clock::time_point until) {
    std::unique_lock lock(mu_);
    if (polling_) {
      lock.unlock();
      std::this_thread::sleep_until(std::min(until, Clock::now() + std::chrono::milliseconds(1)));
      lock.lock();
    } else {
      cv_.wait_until(lock, until, [&] { return finished_ > seen; });
    }
    return finished_;
  }
  /// Whether the driver polls for results (every millisecond) instead of being woken by each.
  void poll(bool on) {
    std::lock_guard lock(mu_);
    polling_ = on;
  }

  long started() const { return started_; }
  /// Results between `from` and `to`.
  long finishedBetween(Clock::time_point from, Clock::time_point to) {
    std::lock_guard lock(mu_);
    return std::count_if(finish_times_.begin(), finish_times_.end(),
                         [&](auto t) { return t >= from && t <= to; });
  }

 private:
  const LlmJudge& judge_;
  Event base_;
  long next_id_ = 0, started_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  long finished_ = 0, notify_at_ = -1;
  bool polling_ = false;
  std::vector<Clock::time_point> finish_times_;
};

/// Waves of `k` calls submitted at once; the first is the warm-up (its resident set growth /
/// k goes to `rss_per_call_kib`), the `waves` after it are measured.
Measured burst(Caller& caller, int k, int waves, double& rss_per_call_kib) {
  Measured m;
  Clock::time_point t0;
  for (int w = 0; w <= waves; ++w) {
    if (w == 1) t0 = Clock::now();
    const long rss_before = rssKib();
    const auto first = Clock::now();
    for (int c = 0; c < k; ++c) caller.start(w > 0 ? &m : nullptr);
    if (w == 0 && k > 1) {  // all submitted; the first replies come 200 ms after the first call
      std::this_thread::sleep_until(first + std::chrono::milliseconds(120));
      rss_per_call_kib = static_cast<double>(rssKib() - rss_before) / k;
    }
    caller.waitFinished(caller.started());
  }
  m.calls_per_s =
      static_cast<double>(waves) * k / std::chrono::duration<double>(Clock::now() - t0).count();
  return m;
}

/// `k` calls kept in flight: started evenly over one server delay, then each result starts
/// the next; the `k * waves` calls started after that ramp are measured.
Measured steady(Caller& caller, int k, int waves, pid_t server) {
  Measured m;
  const double cpu0 = selfCpuSeconds(), server_cpu0 = processCpuSeconds(server);
  const long allocations0 = g_allocations.load();
  const long base = caller.started();  // every earlier call has finished
  const long measured = static_cast<long>(k) * waves;
  const auto t0 = Clock::now();
  const auto step = std::chrono::duration<double, std::milli>(kServerDelayMs / k);
  caller.poll(k >= 256);  // 1,024 in flight: 5 results a millisecond
  long seen = base;       // results already answered by a new call
  Clock::time_point first_measured{};
  auto startNext = [&] {  // the first k are the ramp's
    const long i = caller.started() - base;
    if (i == k) first_measured = Clock::now();
    caller.start(i < k ? nullptr : &m);
  };
  for (long i = 0; (i = caller.started() - base) < k + measured;) {
    const auto next = i < k ? t0 + std::chrono::duration_cast<Clock::duration>(step * i)
                            : Clock::now() + std::chrono::seconds(1);
    const long finished = caller.finishedAfter(seen, next);
    for (; seen < finished && caller.started() - base < k + measured; ++seen) startNext();
    if (caller.started() - base < k && Clock::now() >= next) startNext();
  }
  const auto last_measured = Clock::now();
  caller.waitFinished(caller.started());
  const double calls = static_cast<double>(k + measured);
  m.client_cpu_us = (selfCpuSeconds() - cpu0) * 1e6 / calls;
  m.allocations = static_cast<double>(g_allocations.load() - allocations0) / calls;
  m.server_cpu_us = (processCpuSeconds(server) - server_cpu0) * 1e6 / calls;
  // While every call in flight is a measured one: from one delay after the first was started
  // to the start of the last.
  const auto from = first_measured + std::chrono::milliseconds(int(kServerDelayMs));
  const double secs = std::chrono::duration<double>(last_measured - from).count();
  m.calls_per_s =
      secs > 0 ? static_cast<double>(caller.finishedBetween(from, last_measured)) / secs : 0;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int waves = 5, only = 0;
  // A whole decimal number, all of `text`; -1 otherwise.
  const auto number = [](const char* text) {
    const std::string_view t(text);
    int v = -1;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && end == t.data() + t.size() ? v : -1;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--waves" && i + 1 < argc) {
      waves = number(argv[++i]);
      if (waves < 2 || waves > 1000) {
        // One wave after the ramp leaves no time when every call in flight is a measured one.
        std::fprintf(stderr,
                     "llm_dispatch_bench: --waves takes a whole number from 2 to 1000, "
                     "not '%s'\n",
                     argv[i]);
        return 2;
      }
    } else if (a == "--only" && i + 1 < argc) {
      only = number(argv[++i]);
      if (only != 1 && only != 64 && only != 1024) {
        std::fprintf(stderr, "llm_dispatch_bench: --only takes 1, 64 or 1024, not '%s'\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(a == "--help" || a == "-h" ? stdout : stderr,
                   "usage: assay_llm_dispatch_bench [--waves N] [--only 1|64|1024]\n"
                   "One JSON line per level of calls in flight (docs/BENCHMARKS.md, section 3):\n"
                   "1, 64 and 1,024, or the --only one; --waves measured waves a level (2 to\n"
                   "1000, default 5; 1 in flight runs 4 times as many).\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  // The judge's and the ledger's log lines go to stderr: stdout holds only the JSON lines.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("dispatch_bench"));
  rlimit nofile{};  // 1,024 connections (and the server's as many) need more than 1,024 fds
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  test::FakeLlmServer server(nullptr, "", {"--delay-ms", std::to_string(int(kServerDelayMs))});
  BudgetOptions budget;  // memory store
  prometheus::Registry registry;
  CallServices services{budget, registry};
  LlmJudgeSettings s;
  s.name = "dispatch";
  s.rubric = *builtinRubric("faithfulness");
  s.endpoint = server.url("/v1");
  s.model = "gpt-4o-mini";
  s.price = *PriceTable::builtin().find("gpt-4o-mini");
  s.global_daily_limit_eur = 1e5;  // the ledger's largest cap is 1e6
  s.max_in_flight = 1024;
  s.retry.max_attempts = 1;
  LlmJudge judge(s, services);
  Caller caller(judge);
  // The first level run pays for what the process sets up on its first calls (thread-local
  // buffers, the compiled verdict schema, the allocator's arenas): with --only 64 its first-wave
  // memory per call read 67 KiB instead of 16-18. One call first, unmeasured, takes it.
  if (only > 1) {
    double ignored = 0;
    burst(caller, 1, 1, ignored);
  }
  for (const int k : {1, 64, 1024}) {
    if (only != 0 && k != only) continue;
    double rss_per_call_kib = 0;
    const int n = k == 1 ? waves * 4 : waves;
    const Measured b = burst(caller, k, n, rss_per_call_kib);
    const Measured st = steady(caller, k, n, server.pid());
    char rss[32] = "null";  // not measured at 1 in flight
    if (k > 1) std::snprintf(rss, sizeof rss, "%.1f", rss_per_call_kib);
    std::printf(
        "{\"in_flight\": %d, \"calls\": %zu, \"failed\": %ld, \"calls_per_s\": %.1f, "
        "\"added_p50_ms\": %.3f, \"added_p99_ms\": %.3f, \"burst_calls\": %zu, "
        "\"burst_failed\": %ld, \"burst_calls_per_s\": %.1f, \"burst_p50_ms\": %.3f, "
        "\"burst_p99_ms\": %.3f, \"rss_per_call_kib\": %s, \"client_cpu_us\": %.1f, "
        "\"server_cpu_us\": %.1f, \"allocations_per_call\": %.1f, "
        "\"allocations_on_request_path\": %.1f}\n",
        k, st.added_ms.size() + static_cast<std::size_t>(st.failed), st.failed, st.calls_per_s,
        percentile(st.added_ms, 0.5), percentile(st.added_ms, 0.99),
        b.added_ms.size() + static_cast<std::size_t>(b.failed), b.failed, b.calls_per_s,
        percentile(b.added_ms, 0.5), percentile(b.added_ms, 0.99), rss, st.client_cpu_us,
        st.server_cpu_us, st.allocations,
        st.requests ? static_cast<double>(st.request_allocations) / st.requests : 0.0);
    std::fflush(stdout);
  }
  services.stop();
  return 0;
}
