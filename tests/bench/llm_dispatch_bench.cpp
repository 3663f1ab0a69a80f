// LLM dispatch under load (docs/BENCHMARKS.md, section "LLM dispatch"): LlmJudge calls against
// the fake provider (tests/tools/fake_llm_server.cpp, plain HTTP on loopback) answering every
// call after a fixed 200 ms, with 1, 64 and 1,024 calls in flight. Every call goes the whole
// way: prompt, budget reservation and settlement (memory ledger, its own thread), the request
// on the one HTTP client thread, reply parsing. Calls are sent in waves of K (all submitted from
// this thread, then awaited), so K are in flight at once. The first wave of each K is a warm-up,
// not measured: it opens the connections (and the fake server its thread per connection),
// which later waves reuse, as a judge with max_in_flight K does in steady state.
//   added latency = (call() to result) - 200 ms: what assay and the loopback round trip add,
//                   the fake server's own request handling included (an upper bound on ours);
//   memory per call = (resident set with K in flight, sampled 120 ms into a wave) - (resident
//                   set before the wave), / K: sockets, buffers, the pending call's state.
// Prints one JSON object per K on stdout; asserts nothing (a call that does not end `ok` is
// counted in "failed").
//   usage: assay_llm_dispatch_bench [--waves N]

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../llm/fake_server.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/llm_judge.hpp"

using namespace assay;
using namespace assay::llm;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kServerDelayMs = 200;

/// Resident set size in KiB (/proc/self/status VmRSS), 0 when unreadable.
long rssKib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  int waves = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--waves") waves = std::max(1, std::atoi(argv[i + 1]));
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

  Event base;
  base.question = "How long is the warranty?";
  base.answer = "The warranty lasts two years and covers water damage [1].";
  base.contexts.push_back(
      Context{"1", std::string(1500, 'w') + " The warranty lasts two years.", ""});
  long next_id = 0;
  for (const int k : {1, 64, 1024}) {
    std::vector<double> added_ms;
    long failed = 0, rss_delta_kib = 0;
    const int rounds = (k == 1 ? waves * 4 : waves) + 1;  // the first: warm-up
    auto t0 = Clock::now();
    for (int w = 0; w < rounds; ++w) {
      if (w == 1) {
        t0 = Clock::now();
        added_ms.clear();
        failed = 0;
      }
      const long rss_before = rssKib();
      std::mutex mu;
      std::condition_variable cv;
      int pending = k;
      std::vector<Clock::time_point> started(static_cast<std::size_t>(k));
      for (int c = 0; c < k; ++c) {
        Event e = base;
        e.id = "dispatch-" + std::to_string(next_id++);
        started[static_cast<std::size_t>(c)] = Clock::now();
        judge.call(e, [&, c](LlmCallResult r) {
          const double ms = std::chrono::duration<double, std::milli>(
                                Clock::now() - started[static_cast<std::size_t>(c)])
                                .count();
          std::lock_guard lock(mu);
          if (r.verdict.outcome == Outcome::kOk)
            added_ms.push_back(ms - kServerDelayMs);
          else
            ++failed;
          if (--pending == 0) cv.notify_one();
        });
      }
      if (w == 0 && k > 1) {  // the warm-up wave: its connections are part of a call's cost  // all
                              // submitted; the first replies come 200 ms after the first call
        std::this_thread::sleep_until(started[0] + std::chrono::milliseconds(120));
        rss_delta_kib = rssKib() - rss_before;
      }
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return pending == 0; })) {
        std::fprintf(stderr, "llm_dispatch_bench: %d call(s) unanswered after 60 s\n", pending);
        std::_Exit(1);  // the callbacks still reference this frame: no unwinding
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const long calls = static_cast<long>(rounds - 1) * k;
    std::printf(
        "{\"in_flight\": %d, \"calls\": %ld, \"failed\": %ld, \"seconds\": %.3f, "
        "\"calls_per_s\": %.1f, \"added_p50_ms\": %.3f, \"added_p99_ms\": %.3f, "
        "\"rss_per_call_kib\": %.1f}\n",
        k, calls, failed, secs, static_cast<double>(calls) / secs, percentile(added_ms, 0.5),
        percentile(added_ms, 0.99), k > 1 ? static_cast<double>(rss_delta_kib) / k : 0.0);
    std::fflush(stdout);
  }
  services.stop();
  return 0;
}
