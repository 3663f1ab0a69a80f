// What a warm LLM call allocates on its request path (docs/ARCHITECTURE.md, "Asynchronous
// judges: the LLM judges"; docs/BENCHMARKS.md, LLM dispatch): with a max_in_flight slot free,
// LlmJudge::call builds the prompt and the request, claims and reserves in the memory ledger
// (inline, on the caller's thread) and hands the request to the HTTP client thread before it
// returns. Once the pool of calls is warm: nothing, the request body included (its buffer is
// the pooled call's); the verdict store's new entry comes from its memory pool, which asks
// operator new for a chunk now and then. Counted by this binary's operator new, per thread.

#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <numeric>
#include <vector>

#include "fake_server.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/llm_judge.hpp"

namespace {
thread_local long t_allocations = 0;  // operator new calls of this thread
}  // namespace

// The replacements below pair malloc with free; GCC, seeing them inlined into the library's
// deallocations, takes them for a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace assay;
using namespace assay::llm;

TEST_CASE("a warm LLM call allocates nothing on its request path") {
  test::FakeLlmServer server;
  BudgetOptions budget;  // the store in memory: the ledger inline
  prometheus::Registry registry;
  CallServices services{budget, registry};
  LlmJudgeSettings s;
  s.name = "alloc";
  s.rubric = *builtinRubric("faithfulness");
  s.endpoint = server.url("/v1");
  s.model = "gpt-4o-mini";
  s.price = *PriceTable::builtin().find("gpt-4o-mini");
  s.global_daily_limit_eur = 100;
  s.daily_limit_eur = 50;  // two scopes: "global" and "judge:alloc"
  s.timeout = std::chrono::seconds(10);
  s.retry.max_attempts = 1;
  LlmJudge judge(s, services);

  Event e;
  e.question = "How long is the warranty?";
  e.answer = "The warranty lasts two years and covers water damage [1].";
  e.contexts.push_back(Context{"1", std::string(1500, 'w') + " The warranty lasts two years.", ""});
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0, ok = 0;
  const std::function<void(LlmCallResult)> done = [&](const LlmCallResult& r) {
    std::lock_guard lock(mu);
    ++finished;
    ok += r.verdict.outcome == Outcome::kOk ? 1 : 0;
    cv.notify_all();
  };
  // One call after another (each finds its slot free and the connection idle): the
  // allocations of this thread inside each call().
  int next_id = 0;
  const auto run = [&](int n) {
    std::vector<long> counts;
    counts.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      char id[32];
      std::snprintf(id, sizeof id, "event-%06d", next_id++);  // the same length every time
      e.id = id;
      std::function<void(LlmCallResult)> callback = done;  // its copy outside the count
      const int target = finished + 1;
      const long before = t_allocations;
      judge.call(e, std::move(callback));
      counts.push_back(t_allocations - before);
      std::unique_lock lock(mu);
      REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished >= target; }));
    }
    return counts;
  };
  // Eight calls at once first: the pool then holds a spare call for a call started while the
  // one before is still on its way back (the client thread lets go of it after `done`).
  {
    std::function<void(LlmCallResult)> callback;
    for (int i = 0; i < 8; ++i) {
      char id[32];
      std::snprintf(id, sizeof id, "event-%06d", next_id++);
      e.id = id;
      callback = done;
      judge.call(e, std::move(callback));
    }
    std::unique_lock lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished >= 8; }));
  }
  const auto cold = run(40);  // fills the buffers and the store's free nodes
  const auto warm = run(40);
  CHECK(ok == 88);
  INFO("cold: first " << cold.front() << ", warm: " << warm.front() << " ... " << warm.back());
  // The verdict store's pool (or its table's bucket array) grows now and then: a chunk, not an
  // allocation per call. Before this work: 31 a call (prompt, body, keys, ledger requests,
  // callbacks, the store's nodes, the client's coroutine frames), 4 with the store's nodes.
  CHECK(*std::max_element(warm.begin(), warm.end()) <= 2);
  CHECK(std::accumulate(warm.begin(), warm.end(), 0L) <= 4);
  services.stop();
}
