// batch: true LLM judges against the fake provider's batch endpoints (tests/tools/
// fake_llm_server.cpp: OpenAI's files + batches, Anthropic's message batches).

#include <doctest/doctest.h>
#include <prometheus/registry.h>
#include <rapidjson/document.h>

#include <chrono>
#include <cmath>
#include <future>
#include <thread>
#include <vector>

#include "core/utf8.hpp"
#include "fake_server.hpp"
#include "judges/llm/call_services.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/rubric.hpp"
#include "tests/wait.hpp"

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
    // A batch leaves at batch_max_requests, or batch_max_wait after its first request. The
    // tests that count batches submit 100 calls well within it: 250 calls took at most 0.5 s
    // under ASan with a build beside the test, and over 1 s once in a CI run at -j8 beside a
    // build (with batch_max_wait 1 s, which then split a batch). 10 s is ten times that; the
    // last batch of those tests waits for it.
    s.batch_max_wait = 10'000ms;
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
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i)
    j.call(event(i), [&promises, i](LlmCallResult r) {
      promises[static_cast<std::size_t>(i)].set_value(std::move(r));
    });
  MESSAGE(n << " calls submitted in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - t0)
                   .count()
            << " ms");
  std::vector<LlmCallResult> out;
  for (auto& f : futures) {
    REQUIRE(f.wait_for(test::kSoon) == std::future_status::ready);
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
  // Every result settled: no batch left in the store. The record is dropped by a step the
  // poll queues on the ledger after it has settled the results, and the verdicts can be handed
  // on before that step is queued (CI under load: the last batch's record was still there).
  CHECK(test::waitUntil("the last batch's record dropped", [&] {
    fx.calls.ledger().sync();
    return fx.calls.ledger().store().batchRecords("faithfulness_batch")->empty();
  }));
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
  // The record is dropped by a step queued after the releases, by the HTTP thread once it has
  // queued them: the verdicts can be handed on before that step is queued (CI under ASan).
  CHECK(test::waitUntil("the refused batch's record dropped", [&] {
    fx.calls.ledger().sync();
    return fx.calls.ledger().store().batchRecords("faithfulness_batch")->empty();
  }));
}

TEST_CASE("a refused batch's justification is UTF-8, cut between characters") {
  // The fake's 404 body quotes the path; 'é' from byte 47 on puts byte 299, where the body
  // used to be cut (substr(0, 300)), on the first byte of a character.
  BatchFixture fx;
  auto s = fx.settings(Provider::kOpenAi, 2);
  std::string path = "/v2/x";
  for (int i = 0; i < 200; ++i) path += "\xC3\xA9";
  s.endpoint = fx.server.url(path);
  LlmJudge j(s, fx.calls);
  for (const auto& r : runAll(j, 2)) {
    CHECK(r.verdict.outcome == Outcome::kProviderError);
    CAPTURE(r.verdict.justification);
    CHECK(r.verdict.justification.find("HTTP 404") != std::string::npos);
    CHECK(r.verdict.justification.find("\xC3\xA9\xE2\x80\xA6") != std::string::npos);  // "é…"
    CHECK(isValidUtf8(r.verdict.justification));
  }
}

// ---- Taking over a batch whose instance died at each step of its submission: its record
// ---- (llm_batch.cpp, batchRecord) is written before the upload, then with the input file,
// ---- then with the provider's id.

namespace {

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a dead instance left: `n` requests reserved and claimed (25 h, as submitBatch does) and
// their record under "dead-batch", with `file` (an uploaded input file, or "") and no batch id.
// Returns the events' ids.
std::vector<std::string> leaveRecord(BatchFixture& fx, int n, const std::string& file) {
  auto& store = fx.calls.ledger().store();
  const auto day = budgetDay("UTC", nowMs());
  std::string record = R"({"id":"","file":")" + file + R"(","submitted_ms":)" +
                       std::to_string(nowMs()) + R"(,"requests":[)";
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    const std::string ev = "dead-" + std::to_string(i),
                      res = ev + "/faithfulness_batch/dead/" + std::to_string(i);
    REQUIRE(store.reserve({{"global", 5.0}}, 0.001, day, res, 90'000'000).status ==
            ReserveStatus::kReserved);
    REQUIRE(store.claim(ev, "faithfulness_batch", res, 90'000'000).status ==
            ClaimResult::Status::kClaimed);
    record += std::string(i ? "," : "") + R"([")" + "r" + std::to_string(i) + R"(",")" + ev +
              R"(",")" + res + R"(",")" + day + R"(",120])";
    ids.push_back(ev);
  }
  record += "]}";
  REQUIRE(store.saveBatch("faithfulness_batch", "dead-batch", record));
  return ids;
}

// Uploads `n` requests (custom ids r0…) as OpenAI's batch input file; returns its id.
std::string upload(BatchFixture& fx, int n) {
  std::string jsonl;
  for (int i = 0; i < n; ++i)
    jsonl += R"({"custom_id":"r)" + std::to_string(i) +
             R"(","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini",)"
             R"("messages":[{"role":"user","content":"Judge faithfulness (1-4)."}],)"
             R"("max_tokens":200}})" +
             "\n";
  HttpRequest r;
  r.method = "POST";
  r.url = fx.server.url("/v1/files");
  r.headers = {{"authorization", "Bearer k"}, {"content-type", "multipart/form-data; boundary=B"}};
  r.body =
      "--B\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--B\r\n"
      "Content-Disposition: form-data; name=\"file\"; filename=\"f.jsonl\"\r\n\r\n" +
      jsonl + "\r\n--B--\r\n";
  rapidjson::Document d;
  d.Parse(fx.client.send(r).body.c_str());
  REQUIRE(d.IsObject());
  return d["id"].GetString();
}

// Waits until the judge has dealt with the record, then returns each event's claim as a new
// call would see it.
std::vector<ClaimResult::Status> afterTakeover(BatchFixture& fx,
                                               const std::vector<std::string>& ids) {
  auto& store = fx.calls.ledger().store();
  test::waitUntil("the dead instance's batch record taken over",
                  [&] { return store.batchRecords("faithfulness_batch")->empty(); });
  fx.calls.ledger().sync();
  REQUIRE(store.batchRecords("faithfulness_batch")->empty());
  std::vector<ClaimResult::Status> out;
  for (const auto& ev : ids)
    out.push_back(store.claim(ev, "faithfulness_batch", "a-new-call", 1000).status);
  return out;
}

}  // namespace

TEST_CASE("take-over: the provider created the batch, its instance never heard the id") {
  BatchFixture fx;
  const auto file = upload(fx, 3);
  {  // the dead instance's POST /v1/batches reached the provider
    HttpRequest r;
    r.method = "POST";
    r.url = fx.server.url("/v1/batches");
    r.headers = {{"authorization", "Bearer k"}, {"content-type", "application/json"}};
    r.body = R"({"input_file_id":")" + file +
             R"(","endpoint":"/v1/chat/completions","completion_window":"24h"})";
    REQUIRE(fx.client.send(r).status == 200);
  }
  const auto ids = leaveRecord(fx, 3, file);
  LlmJudge j(fx.settings(Provider::kOpenAi, 100), fx.calls);
  const auto claims = afterTakeover(fx, ids);
  for (const auto c : claims) CHECK(c == ClaimResult::Status::kStored);  // settled, found by file
  const auto s = fx.stats();
  CHECK(s["batches"].GetInt() == 1);  // found, not created again
  CHECK(s["batched"].GetInt() == 3);
}

TEST_CASE("take-over: the input file was uploaded, the batch not created") {
  BatchFixture fx;
  const auto ids = leaveRecord(fx, 2, upload(fx, 2));
  LlmJudge j(fx.settings(Provider::kOpenAi, 100), fx.calls);
  const auto claims = afterTakeover(fx, ids);
  for (const auto c : claims) CHECK(c == ClaimResult::Status::kStored);
  CHECK(fx.stats()["batches"].GetInt() == 1);  // created from the file by the take-over
}

TEST_CASE("take-over: the upload had not finished: every request released, nothing created") {
  BatchFixture fx;
  const auto ids = leaveRecord(fx, 2, "");
  LlmJudge j(fx.settings(Provider::kOpenAi, 100), fx.calls);
  const auto claims = afterTakeover(fx, ids);
  for (const auto c : claims) CHECK(c == ClaimResult::Status::kClaimed);  // judged again
  CHECK(fx.stats()["batches"].GetInt() == 0);
  const auto spent = fx.calls.ledger().store().spent("global", budgetDay("UTC", nowMs()));
  CHECK(spent.outstanding_eur == doctest::Approx(0.0));  // the reservations released
  CHECK(spent.spent_eur == doctest::Approx(0.0));
}
