// What assay adds to an LLM judge call, measured against the fake provider on loopback
// (tests/tools/fake_llm_server.cpp, plain HTTP, answers at once). Run: scripts/bench.
//   BM_RawHttpCall:  one chat-completions request with HttpClient alone (keep-alive);
//   BM_LlmJudgeCall: the same call through LlmJudge: prompt building, budget reservation and
//                    settlement (memory store, on the ledger's thread: two thread hops),
//                    request/reply codecs, verdict parsing.
// The difference is the added latency per call. Prints numbers; asserts nothing.

#include <benchmark/benchmark.h>

#include <future>

#include "../llm/fake_server.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/llm_judge.hpp"

using namespace assay;
using namespace assay::llm;

namespace {

struct Env {
  test::FakeLlmServer server;
  HttpClient client;
  BudgetOptions budget;  // memory store
  prometheus::Registry registry;
  CallServices services{budget, registry};
  Event event;
  Env() {
    event.id = "bench";
    event.question = "How long is the warranty?";
    event.answer = "The warranty lasts two years and covers water damage [1].";
    event.contexts.push_back(
        Context{"1", std::string(1500, 'w') + " The warranty lasts two years.", ""});
  }
  LlmJudgeSettings settings() {
    LlmJudgeSettings s;
    s.name = "bench";
    s.rubric = *builtinRubric("faithfulness");
    s.endpoint = server.url("/v1");
    s.model = "gpt-4o-mini";
    s.price = *PriceTable::builtin().find("gpt-4o-mini");
    s.global_daily_limit_eur = 1e6;
    return s;
  }
};

Env& env() {
  static Env e;
  return e;
}

void BM_RawHttpCall(benchmark::State& state) {
  auto& e = env();
  const auto prompt = *buildPrompt(*builtinRubric("faithfulness"), e.event, 100000);
  const auto req =
      buildRequest(Provider::kOpenAi, e.server.url("/v1"), "k", "gpt-4o-mini", prompt, 300);
  for (auto _ : state) {
    auto r = e.client.send(req);
    benchmark::DoNotOptimize(r);
    if (r.status != 200) state.SkipWithError("fake provider did not answer 200");
  }
}
BENCHMARK(BM_RawHttpCall)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LlmJudgeCall(benchmark::State& state) {
  auto& e = env();
  LlmJudge judge(e.settings(), e.services);
  static long n = 0;  // Google Benchmark calls this function several times
  for (auto _ : state) {
    // A new id per call: a repeated (event, judge) re-emits its stored verdict without a call.
    Event event = e.event;
    event.id = "bench-" + std::to_string(n++);
    std::promise<LlmCallResult> p;
    auto f = p.get_future();
    judge.call(event, [&p](LlmCallResult r) { p.set_value(std::move(r)); });
    auto r = f.get();
    if (r.verdict.outcome != Outcome::kOk) {
      state.SkipWithError(("verdict not ok: " + std::string(outcomeName(r.verdict.outcome)) + " " +
                           r.verdict.justification)
                              .c_str());
      break;
    }
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_LlmJudgeCall)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
