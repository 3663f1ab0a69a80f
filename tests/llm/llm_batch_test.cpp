// batch: true LLM judges against the fake provider's batch endpoints (tests/tools/
// fake_llm_server.cpp: OpenAI's files + batches, Anthropic's message batches).

#include <doctest/doctest.h>
#include <prometheus/registry.h>
#include <rapidjson/document.h>

#include <cmath>
#include <future>
#include <vector>

#include "fake_server.hpp"
#include "judges/llm/call_services.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/rubric.hpp"

using namespace assay;
using namespace assay::llm;
using namespace std::chrono_literals;

namespace {

struct BatchFixture {
  test::FakeLlmServer server;
  BudgetOptions budget;
  prometheus::Registry registry;
  CallServices calls{budget, registry};
  HttpClient client;

  LlmJudgeSettings settings(Provider p, std::size_t max_requests) {
    LlmJudgeSettings s;
    s.name = "faithfulness_batch";
    s.rubric = *builtinRubric("faithfulness");
    s.provider = p;
    s.endpoint = p == Provider::kOpenAi ? server.url("/v1") : server.url("");
    s.model = p == Provider::kOpenAi ? "gpt-4o-mini" : "claude-3-5-haiku-20241022";
    s.api_key = "k";
    s.price = *PriceTable::builtin().find(s.model);
    s.global_daily_limit_eur = 5.0;
    s.timeout = 5s;
    s.batch = true;
    s.batch_max_requests = max_requests;
    s.batch_max_wait = 1000ms;
    s.batch_poll = 100ms;
    return s;
  }
  rapidjson::Document stats() {
    HttpRequest r;
    r.url = server.url("/_fake/stats");
    r.method = "GET";
    rapidjson::Document d;
    d.Parse(client.send(r).body.c_str());
    return d;
  }
};

Event event(int n) {
  Event e;
  e.id = "batch-req-" + std::to_string(n);
  e.question = "How long is the warranty? (" + std::to_string(n) + ")";
  e.answer = "Two years.";
  e.contexts.push_back(Context{"1", "The warranty lasts two years.", ""});
  return e;
}

std::vector<LlmCallResult> runAll(LlmJudge& j, int n) {
  std::vector<std::promise<LlmCallResult>> promises(static_cast<std::size_t>(n));
  std::vector<std::future<LlmCallResult>> futures;
  for (auto& p : promises) futures.push_back(p.get_future());
  for (int i = 0; i < n; ++i)
    j.call(event(i), [&promises, i](LlmCallResult r) {
      promises[static_cast<std::size_t>(i)].set_value(std::move(r));
    });
  std::vector<LlmCallResult> out;
  for (auto& f : futures) {
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    out.push_back(f.get());
  }
  return out;
}

}  // namespace

TEST_CASE("OpenAI Batch API: 250 requests at 100 a batch -> 100, 100, 50; half price") {
  BatchFixture fx;
  LlmJudge j(fx.settings(Provider::kOpenAi, 100), fx.calls);
  const auto results = runAll(j, 250);
  double spent_usd = 0;
  for (const auto& r : results) {
    REQUIRE(r.verdict.outcome == Outcome::kOk);
    CHECK(r.usage_reported);
    // The batch price is half the list price for every token class (pricing.hpp).
    CHECK(r.cost_usd ==
          doctest::Approx(0.5 * costUsd(*PriceTable::builtin().find("gpt-4o-mini"), r.usage))
              .epsilon(1e-12));
    spent_usd += r.cost_usd;
  }
  const auto s = fx.stats();
  CHECK(s["batches"].GetInt() == 3);
  CHECK(s["batched"].GetInt() == 250);
  CHECK(s["requests"].GetInt() == 0);  // no synchronous call at all
  REQUIRE(s["batch_sizes"].Size() == 3);
  CHECK(s["batch_sizes"][0].GetInt() == 100);
  CHECK(s["batch_sizes"][1].GetInt() == 100);
  CHECK(s["batch_sizes"][2].GetInt() == 50);  // flushed by batch_max_wait
  // The ledger holds what the results cost, to the cent.
  fx.calls.ledger().sync();
  const auto spent = fx.calls.ledger().store().spent(
      "global", budgetDay("UTC", [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
      }()));
  CHECK(std::round(spent.spent_eur * 100) == std::round(costEur(spent_usd, 0.92) * 100));
  CHECK(spent.outstanding_eur == doctest::Approx(0.0));
  // Every result settled: no batch left in the store.
  CHECK(fx.calls.ledger().store().batchRecords("faithfulness_batch")->empty());
}

TEST_CASE("Anthropic Message Batches: 30 requests at 20 a batch -> 20, 10") {
  BatchFixture fx;
  LlmJudge j(fx.settings(Provider::kAnthropic, 20), fx.calls);
  const auto results = runAll(j, 30);
  for (const auto& r : results) {
    REQUIRE(r.verdict.outcome == Outcome::kOk);
    CHECK(r.cost_usd ==
          doctest::Approx(
              0.5 * costUsd(*PriceTable::builtin().find("claude-3-5-haiku-20241022"), r.usage))
              .epsilon(1e-12));
  }
  const auto s = fx.stats();
  CHECK(s["batches"].GetInt() == 2);
  REQUIRE(s["batch_sizes"].Size() == 2);
  CHECK(s["batch_sizes"][0].GetInt() == 20);
  CHECK(s["batch_sizes"][1].GetInt() == 10);
  CHECK(s["messages"].GetInt() == 0);
}

TEST_CASE("a batch the provider refuses: every request provider_error, released, not paid") {
  BatchFixture fx;
  auto s = fx.settings(Provider::kOpenAi, 5);
  s.endpoint = fx.server.url("/v2");  // no such API: 404 on the upload
  LlmJudge j(s, fx.calls);
  const auto results = runAll(j, 5);
  for (const auto& r : results) {
    CHECK(r.verdict.outcome == Outcome::kProviderError);
    CHECK(r.verdict.justification.find("batch file refused") != std::string::npos);
    CHECK(r.cost_eur == 0);
  }
  fx.calls.ledger().sync();
}
