#include "judges/llm/llm_judge.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/clock.hpp"
#include "fake_server.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/llm_call.hpp"
#include "redis_server.hpp"
#include "tests/wait.hpp"

using namespace assay;
using namespace assay::llm;
using namespace std::chrono_literals;

namespace {

/// The services every LLM judge of a process shares, on their own registry.
struct Services {
  explicit Services(std::string store = "memory") { options.store = std::move(store); }
  BudgetOptions options;
  prometheus::Registry registry;
  CallServices calls{options, registry};
  /// The ledger's store, once every queued operation has run.
  BudgetStore& store() {
    calls.ledger().sync();
    return calls.ledger().store();
  }
};

struct Fixture {
  test::FakeLlmServer server;
  HttpClient client;  // scripts the fake provider
  Services services;
  BudgetStore& budget() { return services.store(); }

  LlmJudgeSettings settings(Provider p = Provider::kOpenAi) {
    LlmJudgeSettings s;
    s.name = "faithfulness_llm";
    s.rubric = *builtinRubric("faithfulness");
    s.provider = p;
    s.endpoint = server.url("/v1");
    s.model = "gpt-4o-mini";
    s.api_key = "k";
    s.price = *PriceTable::builtin().find("gpt-4o-mini");
    s.global_daily_limit_eur = 5.0;
    s.timeout = 5s;
    s.retry.base_delay = 10ms;
    s.retry.max_delay = 50ms;
    return s;
  }
  void script(const std::string& json) {
    HttpRequest r;
    r.url = server.url("/_fake/script");
    r.body = json;
    REQUIRE(client.send(r).status == 200);
  }
  /// The body of the last request the fake provider received, parsed.
  rapidjson::Document lastRequest() {
    HttpRequest r;
    r.url = server.url("/_fake/last_request");
    r.method = "GET";
    const auto res = client.send(r);
    rapidjson::Document d;
    d.Parse(res.body.c_str());
    return d;
  }
  long requests() {
    HttpRequest r;
    r.url = server.url("/_fake/stats");
    r.method = "GET";
    const auto res = client.send(r);
    return std::stol(res.body.substr(res.body.find(':') + 1));
  }
  std::string today() {
    return budgetDay("UTC", std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  }
};

Event event() {
  Event e;
  e.id = "req-1";
  e.question = std::string("How long is the warranty?");
  e.answer = std::string("Two years.");
  e.contexts.push_back(Context{"1", "The warranty lasts two years.", ""});
  return e;
}

// Each call judges a new event id: the same (id, judge) pair is judged once (redelivery guard).
LlmCallResult run(LlmJudge& j, Event e = event()) {
  static std::atomic<int> n{0};
  e.id = "req-" + std::to_string(++n);
  std::promise<LlmCallResult> p;
  auto f = p.get_future();
  j.call(e, [&p](LlmCallResult r) { p.set_value(std::move(r)); });
  return f.get();
}

}  // namespace

TEST_CASE("a verdict, its tokens and its cost in euros; the budget is settled") {
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  fx.script(R"([{"score": 3}])");
  const auto r = run(j);
  REQUIRE(r.verdict.outcome == Outcome::kOk);
  CHECK(r.verdict.score == 3);
  CHECK(r.attempts == 1);
  CHECK(r.usage_reported);
  CHECK(r.usage.prompt_tokens > 100);
  const double expected_usd =
      (r.usage.prompt_tokens * 0.15 + r.usage.completion_tokens * 0.60) / 1e6;
  CHECK(r.cost_usd == doctest::Approx(expected_usd).epsilon(1e-12));
  CHECK(r.cost_eur == doctest::Approx(expected_usd * 0.92).epsilon(1e-12));
  const auto snap = fx.budget().spent("global", fx.today());
  CHECK(snap.spent_eur == doctest::Approx(r.cost_eur).epsilon(1e-6));
  CHECK(snap.outstanding_eur == 0.0);
  // Anthropic speaks its own API.
  LlmJudge a(fx.settings(Provider::kAnthropic), fx.services.calls);
  fx.script(R"([{"score": 1}])");
  CHECK(run(a).verdict.score == 1);
}

TEST_CASE("abandon() with a call in flight: its late reply still ends it, once") {
  // abandon() (the services stopped) forgets the calls holding a reservation; one whose reply
  // still comes (the HTTP client not stopped yet) ends normally, the list left as it was.
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  fx.script(R"([{"score": 2, "delay_ms": 300}])");
  std::promise<LlmCallResult> p;
  auto f = p.get_future();
  Event e = event();
  e.id = "abandoned-late";
  j.call(e, [&p](LlmCallResult r) { p.set_value(std::move(r)); });
  REQUIRE(test::waitUntil("the call reaches the provider", [&] { return fx.requests() == 1; }));
  const auto abandoned = j.abandon();
  REQUIRE(abandoned.size() == 1);
  CHECK(abandoned[0].event_id.size() == 32);
  const auto r = f.get();
  CHECK(r.verdict.outcome == Outcome::kOk);
  CHECK(r.verdict.score == 2);
  CHECK(j.inFlight() == 0);
  CHECK(j.abandon().empty());
}

TEST_CASE("the pool of finished calls keeps at most 8 MiB of prompts and bodies") {
  // A backlog of large prompts (30 KB contexts, 200 calls at once) is given back once judged.
  Fixture fx;
  auto s = fx.settings();
  s.max_in_flight = 200;
  LlmJudge j(s, fx.services.calls);
  Event e = event();
  e.contexts[0].text = std::string(30'000, 'w');
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, ok = 0;
  for (int i = 0; i < 200; ++i) {
    e.id = "large-" + std::to_string(i);
    j.call(e, [&](const LlmCallResult& r) {
      std::lock_guard lock(mu);
      ++done;
      ok += r.verdict.outcome == Outcome::kOk ? 1 : 0;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, test::kSoon, [&] { return done == 200; }));
  CHECK(ok == 200);
  // 200 calls of about 60 KB (prompt and body) would be 12 MB.
  CHECK(pooledCallBytes() <= (8u << 20));
  CHECK(pooledCallBytes() > (4u << 20));  // but what fits is kept
}

TEST_CASE("429 with Retry-After: 1 → retried no sooner than 1 s later, then judged") {
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  fx.script(R"([{"status": 429, "retry_after": "1"}, {"score": 2}])");
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kOk);
  CHECK(r.attempts == 2);
  CHECK(r.latency >= 1000ms);
}

TEST_CASE("Retry-After 600 s with max_retry_wait 60 s → rate_limited at once, nothing charged") {
  Fixture fx;
  auto s = fx.settings();
  s.retry.max_retry_wait = 60'000ms;
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"status": 429, "retry_after": "600"}])");
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kRateLimited);
  CHECK(r.attempts == 1);
  // At once, not after a wait: anything below max_retry_wait shows it (1.06 s was seen under
  // ASan on a loaded machine, so the bound is not a second).
  CHECK(r.latency < 30'000ms);
  CHECK(r.cost_eur == 0.0);
  const auto snap = fx.budget().spent("global", fx.today());
  CHECK(snap.spent_eur == 0.0);
  CHECK(snap.outstanding_eur == 0.0);  // the reservation was released
}

TEST_CASE("5xx until attempts run out → provider_error; timeouts → timeout") {
  Fixture fx;
  auto s = fx.settings();
  s.retry.max_attempts = 3;
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"status": 500}, {"status": 502}, {"status": 503}])");
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kProviderError);
  CHECK(r.attempts == 3);
  s.timeout = 200ms;
  s.retry.max_attempts = 2;
  LlmJudge slow(s, fx.services.calls);
  fx.script(R"([{"delay_ms": 1500}, {"delay_ms": 1500}])");
  const auto t = run(slow);
  CHECK(t.verdict.outcome == Outcome::kTimeout);
  CHECK(t.attempts == 2);
}

TEST_CASE("outcomes decided before any call: no_context, context_too_long, skipped_budget") {
  Fixture fx;
  const long before = fx.requests();
  LlmJudge j(fx.settings(), fx.services.calls);
  Event empty = event();
  empty.contexts.clear();
  CHECK(run(j, empty).verdict.outcome == Outcome::kNoContext);
  Event huge = event();
  huge.answer = std::string(200'000, 'z');
  CHECK(run(j, huge).verdict.outcome == Outcome::kContextTooLong);
  auto s = fx.settings();
  s.global_daily_limit_eur = 0.000001;  // less than one call's worst case
  LlmJudge poor(s, fx.services.calls);
  const auto b = run(poor);
  CHECK(b.verdict.outcome == Outcome::kSkippedBudget);
  CHECK(b.verdict.justification.find("global") != std::string::npos);
  CHECK(fx.requests() == before);  // none of these reached the provider
}

TEST_CASE("a refusal answered after a reload raised the cap does not mark the scope exhausted") {
  // CI saw it (integration_test_reload_judges): a call refused under the old cap, answered after
  // SIGHUP rebuilt the judge under a raised one, set assay_budget_exhausted back to 1 for the
  // rest of the day although the store takes calls again.
  Fixture fx;
  auto exhausted = [&fx](const std::string& scope) {
    fx.services.calls.refresh();
    fx.services.calls.ledger().sync();  // the snapshot ran and its gauges were applied
    for (const auto& family : fx.services.registry.Collect())
      if (family.name == "assay_budget_exhausted")
        for (const auto& m : family.metric)
          if (m.label.size() == 1 && m.label[0].value == scope) return m.gauge.value;
    return -1.0;
  };
  auto judged = [](const LlmJudge& j, const std::string& id) {
    Event e = event();
    e.id = id;
    return j.judge(e);
  };
  auto s = fx.settings();
  s.global_daily_limit_eur = 0.000001;  // less than one call's worst case
  auto old_judge = std::make_unique<LlmJudge>(s, fx.services.calls);
  CHECK(judged(*old_judge, "before").outcome == Outcome::kSkippedBudget);
  CHECK(exhausted("global") == 1.0);
  // The ledger thread is held while a call of the old judge waits for its reservation, and the
  // reload builds the new judge (cap EUR 5) before the store refuses that call.
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  fx.services.calls.ledger().run([opened](BudgetStore&) { opened.wait(); });
  std::promise<Verdict> late;
  Event e = event();
  e.id = "late";
  old_judge->judgeAsync(e, [&late](Verdict v) { late.set_value(std::move(v)); });
  LlmJudge new_judge(fx.settings(), fx.services.calls);
  gate.set_value();
  CHECK(late.get_future().get().outcome == Outcome::kSkippedBudget);
  CHECK(exhausted("global") == 0.0);
  CHECK(judged(new_judge, "after").outcome == Outcome::kOk);
  // A refusal under the scope's current cap still marks it.
  s.global_daily_limit_eur = 5.0;
  s.daily_limit_eur = 0.000001;
  LlmJudge capped(s, fx.services.calls);
  CHECK(judged(capped, "capped").outcome == Outcome::kSkippedBudget);
  CHECK(exhausted("judge:faithfulness_llm") == 1.0);
  CHECK(exhausted("global") == 0.0);
}

TEST_CASE("truncated and usage-less replies are still charged") {
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  fx.script(R"([{"kind": "truncated"}])");
  const auto t = run(j);
  CHECK(t.verdict.outcome == Outcome::kTruncated);
  CHECK(t.cost_eur > 0.0);
  fx.script(R"([{"kind": "no_usage", "score": 4}])");
  const auto n = run(j);
  CHECK(n.verdict.score == 4);
  CHECK_FALSE(n.usage_reported);
  CHECK(n.usage.completion_tokens == 300);  // the estimate charges max_tokens of output
  CHECK(n.cost_eur > t.cost_eur);
}

TEST_CASE("a reply's usage is hostile input: absurd token counts never wedge the judge") {
  // 10^12 input tokens at gpt-4o's $2.50/M is $2.5 M, beyond the ledger's 1e6 EUR: the settle
  // used to throw on the ledger thread, the call's completion never ran, and after
  // max_in_flight such replies the judge never called again.
  Fixture fx;
  auto s = fx.settings();
  s.model = "gpt-4o";
  s.price = *PriceTable::builtin().find("gpt-4o");
  s.max_in_flight = 1;
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"score": 2, "prompt_tokens": 1000000000000},
                {"score": 2, "prompt_tokens": 1000000000000},
                {"score": 2, "prompt_tokens": 1000000000000},
                {"score": 4}])");
  const auto call = [&] {
    static std::atomic<int> n{0};
    Event e = event();
    e.id = "hostile-usage-" + std::to_string(++n);
    auto p = std::make_shared<std::promise<LlmCallResult>>();
    auto f = p->get_future();
    j.call(e, [p](LlmCallResult r) { p->set_value(std::move(r)); });
    REQUIRE(f.wait_for(test::kSoon) == std::future_status::ready);
    return f.get();
  };
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    const auto r = call();
    CHECK(r.verdict.outcome == Outcome::kOk);
    CHECK(r.verdict.score == 2);
    CHECK_FALSE(r.usage_reported);  // unreadable: charged its estimate
    CHECK(r.usage.prompt_tokens < 10'000);
    CHECK(r.cost_eur > 0.0);
    CHECK(r.cost_eur < 0.01);
  }
  const auto last = call();  // the one slot is free again
  CHECK(last.verdict.score == 4);
  CHECK(last.usage_reported);
  CHECK(j.inFlight() == 0);
  const auto snap = fx.budget().spent("global", fx.today());
  CHECK(snap.outstanding_eur == 0.0);
  CHECK(snap.spent_eur < 0.05);
}

TEST_CASE("the circuit breaker stops calling a failing endpoint") {
  Fixture fx;
  auto s = fx.settings();
  s.retry.max_attempts = 1;
  s.breaker_failures = 2;
  s.breaker_open = 60'000ms;
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"status": 500}, {"status": 500}, {"score": 4}])");
  CHECK(run(j).verdict.outcome == Outcome::kProviderError);
  CHECK(run(j).verdict.outcome == Outcome::kProviderError);
  const long before = fx.requests();
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kProviderError);
  CHECK(r.verdict.justification.find("circuit breaker open") == 0);
  CHECK(fx.requests() == before);
}

TEST_CASE("a full local backlog ends new calls at once, without reserving") {
  Fixture fx;
  auto s = fx.settings();
  s.max_in_flight = 1;
  s.max_waiting = 1;
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"delay_ms": 400}, {"delay_ms": 10}])");
  std::promise<LlmCallResult> p1, p2;
  Event e1 = event(), e2 = event();
  e1.id = "backlog-1";
  e2.id = "backlog-2";
  j.call(e1, [&](LlmCallResult r) { p1.set_value(std::move(r)); });  // in flight
  j.call(e2, [&](LlmCallResult r) { p2.set_value(std::move(r)); });  // waits
  const auto third = run(j);                                         // no room left
  CHECK(third.verdict.outcome == Outcome::kRateLimited);
  CHECK(third.verdict.justification.find("local backlog full") == 0);
  CHECK(p1.get_future().get().verdict.outcome == Outcome::kOk);
  CHECK(p2.get_future().get().verdict.outcome == Outcome::kOk);
}

TEST_CASE("a budget store that does not answer: skipped_budget, flagged, no call") {
  Fixture fx;
  Services down("redis://127.0.0.1:1/0");  // nothing listens there
  LlmJudge j(fx.settings(), down.calls);
  const long before = fx.requests();
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kSkippedBudget);
  CHECK(r.store_unavailable);
  CHECK(fx.requests() == before);
}

LlmCallResult callOnce(LlmJudge& j, const Event& e) {
  std::promise<LlmCallResult> p;
  auto f = p.get_future();
  j.call(e, [&p](LlmCallResult r) { p.set_value(std::move(r)); });
  return f.get();
}

TEST_CASE("a redelivered event re-emits its stored verdict: no second call, no charge") {
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  Event e = event();
  e.id = "redelivered-1";
  fx.script(R"([{"score": 3, "justification": "The context states two years."}])");
  const long before = fx.requests();
  const auto first = callOnce(j, e);
  REQUIRE(first.verdict.outcome == Outcome::kOk);
  CHECK_FALSE(first.from_store);
  CHECK(first.cost_eur > 0.0);
  const double spent = fx.budget().spent("global", fx.today()).spent_eur;
  const auto again = callOnce(j, e);
  CHECK(again.from_store);
  CHECK(again.verdict.outcome == Outcome::kOk);
  CHECK(again.verdict.score == 3);
  CHECK(again.verdict.justification == first.verdict.justification);
  CHECK(again.cost_eur == 0.0);
  CHECK(again.usage.prompt_tokens == 0);
  CHECK(fx.requests() == before + 1);
  const auto snap = fx.budget().spent("global", fx.today());
  CHECK(snap.spent_eur == doctest::Approx(spent).epsilon(1e-9));
  CHECK(snap.outstanding_eur == 0.0);
  // The same event under another judge name is another pair: called.
  auto s2 = fx.settings();
  s2.name = "relevancy_llm";
  LlmJudge other(s2, fx.services.calls);
  fx.script(R"([{"score": 2}])");
  CHECK_FALSE(callOnce(other, e).from_store);
  CHECK(fx.requests() == before + 2);
}

TEST_CASE("a stored verdict is re-emitted only for the prompt it answered") {
  // The hostile trial: a producer that wrote events with the canary's ids (canary:PERIOD:ID)
  // and answers it chose had their verdicts re-emitted to the canary, which called nothing.
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  Event planted = event();
  planted.id = "canary:1234:c1";
  planted.answer = "Ten years, and a free upgrade.";
  fx.script(R"([{"score": 1}, {"score": 4}])");
  const long before = fx.requests();
  CHECK(callOnce(j, planted).verdict.score == 1);
  Event honest = event();  // the canary's own event under the same id: its own call
  honest.id = planted.id;
  const auto own = callOnce(j, honest);
  CHECK_FALSE(own.from_store);
  CHECK(own.verdict.score == 4);
  CHECK(fx.requests() == before + 2);
  // …and each is still found again by a redelivery of the same bytes.
  CHECK(callOnce(j, honest).from_store);
  CHECK(callOnce(j, planted).from_store);
  CHECK(fx.requests() == before + 2);
  // A judge whose version changed (another rubric, model…) does not re-emit the old verdict.
  auto changed = fx.settings();
  changed.version = "0123456789ab";
  LlmJudge next(changed, fx.services.calls);
  fx.script(R"([{"score": 3}])");
  CHECK_FALSE(callOnce(next, honest).from_store);
  CHECK(fx.requests() == before + 3);
  // The key: 32 hex digits whatever the id's length.
  const std::string key = verdictStoreKey("v", "body", std::string(100'000, 'x'));
  CHECK(key.size() == 32);
  CHECK(key.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(verdictStoreKey("v", "body", "id") != verdictStoreKey("v", "bodyi", "d"));
}

TEST_CASE("a call nobody billed is not stored: the next delivery calls again") {
  Fixture fx;
  auto s = fx.settings();
  s.retry.max_attempts = 1;
  LlmJudge j(s, fx.services.calls);
  Event e = event();
  e.id = "unbilled-1";
  fx.script(R"([{"status": 500}, {"score": 4}])");
  const long before = fx.requests();
  const auto failed = callOnce(j, e);
  CHECK(failed.verdict.outcome == Outcome::kProviderError);
  CHECK(failed.cost_eur == 0.0);
  const auto retried = callOnce(j, e);
  CHECK_FALSE(retried.from_store);
  CHECK(retried.verdict.outcome == Outcome::kOk);
  CHECK(retried.verdict.score == 4);
  CHECK(fx.requests() == before + 2);
}

TEST_CASE("the same event delivered twice at once (a rebalance): one call, both get its verdict") {
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  Event e = event();
  e.id = "concurrent-1";
  fx.script(R"([{"score": 2, "delay_ms": 400}])");
  const long before = fx.requests();
  std::promise<LlmCallResult> p1, p2;
  j.call(e, [&](LlmCallResult r) { p1.set_value(std::move(r)); });
  // The first call holds the lease once its request has reached the provider.
  REQUIRE(
      test::waitUntil("first call at the provider", [&] { return fx.requests() == before + 1; }));
  j.call(e, [&](LlmCallResult r) { p2.set_value(std::move(r)); });
  const auto a = p1.get_future().get();
  const auto b = p2.get_future().get();
  CHECK(a.verdict.score == 2);
  CHECK_FALSE(a.from_store);
  CHECK(b.verdict.score == 2);
  CHECK(b.from_store);
  CHECK(b.cost_eur == 0.0);
  CHECK(fx.requests() == before + 1);
}

TEST_CASE("max_in_flight bounds concurrent calls; every call completes") {
  Fixture fx;
  auto s = fx.settings();
  s.max_in_flight = 2;
  LlmJudge j(s, fx.services.calls);
  fx.script(
      R"([{"delay_ms":200},{"delay_ms":200},{"delay_ms":200},{"delay_ms":200},{"delay_ms":200},{"delay_ms":200}])");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::future<LlmCallResult>> futures;
  std::vector<std::promise<LlmCallResult>> promises(6);
  int n = 0;
  for (auto& p : promises) {
    futures.push_back(p.get_future());
    Event e = event();
    e.id = "parallel-" + std::to_string(++n);
    j.call(e, [&p](LlmCallResult r) { p.set_value(std::move(r)); });
    CHECK(j.inFlight() <= 2);
  }
  for (auto& f : futures) CHECK(f.get().verdict.outcome == Outcome::kOk);
  CHECK(std::chrono::steady_clock::now() - t0 >= 600ms);  // 6 calls, 2 at a time, 200 ms each
  CHECK(j.inFlight() == 0);
}

TEST_CASE("circuit breaker: a 4xx probe answer closes it; calls during the probe wait for it") {
  Fixture fx;
  auto s = fx.settings();
  s.breaker_failures = 2;
  s.breaker_open = 200ms;
  s.retry.max_attempts = 1;
  LlmJudge j(s, fx.services.calls);
  const auto open = [&] {
    fx.script(R"([{"status": 500}, {"status": 500}])");
    CHECK(run(j).verdict.outcome == Outcome::kProviderError);
    CHECK(run(j).verdict.outcome == Outcome::kProviderError);
  };
  open();
  const long before = fx.requests();
  const auto refused = run(j);  // open: no request
  CHECK(refused.verdict.outcome == Outcome::kProviderError);
  CHECK(refused.verdict.justification.find("circuit breaker open") == 0);
  CHECK(fx.requests() == before);
  std::this_thread::sleep_for(250ms);
  // The probe is answered 429: an answer, not an endpoint down. The breaker closes (it used to
  // stay half-open for good, every later call failing at once).
  fx.script(R"([{"status": 429, "retry_after": "1"}, {"score": 3}])");
  CHECK(run(j).verdict.outcome == Outcome::kRateLimited);
  CHECK(run(j).verdict.outcome == Outcome::kOk);
  // Open again; two calls at once when it half-opens: the probe (300 ms) and one that waits
  // for it instead of failing.
  open();
  std::this_thread::sleep_for(250ms);
  fx.script(R"([{"score": 2, "delay_ms": 300}, {"score": 4}])");
  std::promise<LlmCallResult> p1, p2;
  Event e1 = event(), e2 = event();
  e1.id = "probe-1";
  e2.id = "probe-2";
  const long before_probe = fx.requests();
  j.call(e1, [&](LlmCallResult r) { p1.set_value(std::move(r)); });
  // The second call comes while the probe's request is at the provider (300 ms).
  REQUIRE(
      test::waitUntil("probe at the provider", [&] { return fx.requests() == before_probe + 1; }));
  j.call(e2, [&](LlmCallResult r) { p2.set_value(std::move(r)); });
  CHECK(p1.get_future().get().verdict.score == 2);
  const auto waited = p2.get_future().get();
  CHECK(waited.verdict.outcome == Outcome::kOk);
  CHECK(waited.verdict.score == 4);
}

namespace {
/// A series of the fixture's registry: assay_judge_breaker_holds_total{result} or, with an
/// empty result, assay_judge_breaker_held.
double holds(Fixture& fx, const std::string& result,
             const std::string& judge = "faithfulness_llm") {
  const std::string name =
      result.empty() ? "assay_judge_breaker_held" : "assay_judge_breaker_holds_total";
  for (const auto& family : fx.services.registry.Collect())
    if (family.name == name)
      for (const auto& m : family.metric) {
        bool is_judge = false, is_result = result.empty();
        for (const auto& l : m.label) {
          is_judge = is_judge || (l.name == "judge" && l.value == judge);
          is_result = is_result || (l.name == "result" && l.value == result);
        }
        if (is_judge && is_result) return result.empty() ? m.gauge.value : m.counter.value;
      }
  return -1;
}

/// One attempt a call, a breaker that opens after `failures` failures for `open`, and holds
/// calls for `hold` (limits.when_full: block).
LlmJudgeSettings holding(Fixture& fx, int failures, Millis open, Millis hold) {
  auto s = fx.settings();
  s.breaker_failures = failures;
  s.breaker_open = open;
  s.breaker_hold = hold;
  s.retry.max_attempts = 1;
  return s;
}
}  // namespace

TEST_CASE("limits.when_full: block: an open breaker holds calls until the endpoint answers") {
  Fixture fx;
  LlmJudge j(holding(fx, 2, 300ms, 20s), fx.services.calls);
  // Two failures in a row: the first ends (the breaker is still closed), the second opens the
  // breaker and is held instead of ending as provider_error; so is a call made while it is
  // open, without a request. Both are judged once the probe is answered.
  fx.script(R"([{"status": 500}, {"status": 503}, {"score": 2}, {"score": 3}])");
  CHECK(run(j).verdict.outcome == Outcome::kProviderError);
  std::promise<LlmCallResult> p1, p2;
  Event e1 = event(), e2 = event();
  e1.id = "held-1";
  e2.id = "held-2";
  j.call(e1, [&](LlmCallResult r) { p1.set_value(std::move(r)); });
  REQUIRE(test::waitUntil("the failed call held", [&] { return holds(fx, "") == 1; }));
  const long requests = fx.requests();
  j.call(e2, [&](LlmCallResult r) { p2.set_value(std::move(r)); });
  REQUIRE(test::waitUntil("the new call held", [&] { return holds(fx, "") == 2; }));
  CHECK(fx.requests() == requests);  // nothing sent while the breaker is open
  const auto r1 = p1.get_future().get(), r2 = p2.get_future().get();
  CHECK(r1.verdict.outcome == Outcome::kOk);
  CHECK(r2.verdict.outcome == Outcome::kOk);
  CHECK(r1.attempts == 2);
  CHECK(r2.attempts == 1);
  CHECK(holds(fx, "released") == 2);
  CHECK(holds(fx, "gave_up") == 0);
  CHECK(holds(fx, "") == 0);
  CHECK(j.inFlight() == 0);
}

TEST_CASE("an open breaker holds a call at most breaker_hold from its start, then gives up") {
  Fixture fx;
  auto s = holding(fx, 1, 60s, 400ms);
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"status": 502}])");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run(j);  // fails, opens the breaker, is held, gives up
  CHECK(std::chrono::steady_clock::now() - t0 >= 400ms);
  CHECK(r.verdict.outcome == Outcome::kProviderError);
  CHECK(r.verdict.justification.find("circuit breaker open") == 0);
  CHECK(r.verdict.justification.find("last: HTTP 502") != std::string::npos);
  CHECK(r.verdict.justification.find("breaker_max_hold_ms passed") != std::string::npos);
  CHECK(r.cost_eur == 0.0);
  CHECK(holds(fx, "gave_up") == 1);
  CHECK(holds(fx, "released") == 0);
  CHECK(holds(fx, "") == 0);
  // A call that waited for a slot behind a held one meets the open breaker past its time: it
  // gives up at once, and counts as given up too (the new-user trial saw 58 of 80 counted).
  s.max_in_flight = 1;
  s.name = "one_slot";
  LlmJudge one(s, fx.services.calls);
  std::promise<LlmCallResult> q1, q2;
  Event f1 = event(), f2 = event();
  f1.id = "slot-1";
  f2.id = "slot-2";
  fx.script(R"([{"status": 500}])");
  one.call(f1, [&](LlmCallResult x) { q1.set_value(std::move(x)); });
  one.call(f2, [&](LlmCallResult x) { q2.set_value(std::move(x)); });
  CHECK(q1.get_future().get().verdict.outcome == Outcome::kProviderError);
  const auto behind = q2.get_future().get();
  CHECK(behind.verdict.outcome == Outcome::kProviderError);
  CHECK(behind.verdict.justification.find("breaker_max_hold_ms passed") != std::string::npos);
  CHECK(holds(fx, "gave_up", "one_slot") == 2);
  CHECK(holds(fx, "", "one_slot") == 0);
  // Without a hold (limits.when_full: drop_newest) a call meeting the open breaker ends at once.
  s.breaker_hold = 0ms;
  s.name = "no_hold";
  LlmJudge k(s, fx.services.calls);
  fx.script(R"([{"status": 500}])");
  CHECK(run(k).verdict.outcome == Outcome::kProviderError);
  const auto t1 = std::chrono::steady_clock::now();
  const auto at_once = run(k);
  CHECK(at_once.verdict.outcome == Outcome::kProviderError);
  CHECK(at_once.attempts == 0);
  CHECK(std::chrono::steady_clock::now() - t1 < 5s);
}

TEST_CASE("the reply side as a whole: every failure shape gets its outcome, retry and charge") {
  Fixture fx;
  for (Provider p : {Provider::kOpenAi, Provider::kAnthropic}) {
    const bool openai = p == Provider::kOpenAi;
    CAPTURE(openai);
    auto settings = fx.settings(p);
    settings.breaker_failures = 100;  // Anthropic's overloaded (529) counts as the endpoint failing
    LlmJudge j(settings, fx.services.calls);
    // A streamed reply is assembled: the verdict, its reported usage, one attempt.
    fx.script(R"([{"kind": "stream", "score": 4}])");
    const auto stream = run(j);
    CHECK(stream.verdict.outcome == Outcome::kOk);
    CHECK(stream.verdict.score == 4);
    CHECK(stream.usage_reported);
    CHECK(stream.usage.completion_tokens > 5);
    CHECK(stream.attempts == 1);
    // An error object in a 200 body (OpenRouter's 429, Anthropic's overloaded): retried, and
    // the failed attempt costs nothing.
    fx.script(R"([{"kind": "error_200"}, {"score": 2}])");
    const auto e200 = run(j);
    CHECK(e200.verdict.outcome == Outcome::kOk);
    CHECK(e200.attempts == 2);
    CHECK(e200.cost_usd == doctest::Approx(costUsd(fx.settings(p).price, e200.usage)));
    // Every attempt an error in a 200: rate_limited once retries run out, nothing charged.
    fx.script(
        R"([{"kind": "error_200"}, {"kind": "error_200"}, {"kind": "error_200"}, {"kind": "error_200"}])");
    const auto all200 = run(j);
    CHECK(all200.verdict.outcome == Outcome::kRateLimited);
    CHECK(all200.attempts == 4);
    CHECK(all200.cost_eur == 0.0);
    // A stream cut half-way: OpenAI's reported nothing yet, so it is retried; Anthropic's
    // message_start reported the input tokens, so it is charged those and not called again.
    fx.script(R"([{"kind": "stream_cut"}, {"score": 3}])");
    const auto cut = run(j);
    if (openai) {
      CHECK(cut.verdict.outcome == Outcome::kOk);
      CHECK(cut.attempts == 2);
    } else {
      CHECK(cut.verdict.outcome == Outcome::kProviderError);
      CHECK(cut.verdict.justification.find("stream_incomplete") != std::string::npos);
      CHECK(cut.attempts == 1);
      CHECK(cut.usage.prompt_tokens > 100);
      CHECK(cut.usage.completion_tokens == 1);
      CHECK(cut.cost_eur > 0.0);
      run(j);  // consumes the verdict left queued
    }
    // No choices (OpenAI) / no content blocks (Anthropic), usage reported: charged, no retry.
    fx.script(R"([{"kind": "empty_choices"}])");
    const auto empty = run(j);
    CHECK(empty.verdict.outcome == Outcome::kProviderError);
    CHECK(empty.verdict.justification.find(openai ? "no choices" : "no text content block") !=
          std::string::npos);
    CHECK(empty.attempts == 1);
    CHECK(empty.usage_reported);
    CHECK(empty.cost_eur > 0.0);
    // Out of credit: OpenAI's 429 insufficient_quota is not retried (Anthropic says 400).
    fx.script(R"([{"kind": "quota"}, {"score": 1}])");
    const auto quota = run(j);
    CHECK(quota.verdict.outcome == Outcome::kProviderError);
    CHECK(quota.attempts == 1);
    CHECK(quota.cost_eur == 0.0);
    CHECK(quota.verdict.justification.find(openai ? "HTTP 429 insufficient_quota"
                                                  : "HTTP 400 invalid_request_error: Your "
                                                    "credit balance is too low") == 0);
    run(j);  // consumes the verdict left queued
    // A content filter: Azure's 400 content_filter (nothing billed), Anthropic's
    // stop_reason "refusal" (billed): refused, not retried.
    fx.script(R"([{"kind": "content_filter"}, {"score": 1}])");
    const auto filtered = run(j);
    CHECK(filtered.verdict.outcome == Outcome::kRefused);
    CHECK(filtered.attempts == 1);
    CHECK((filtered.cost_eur > 0.0) == !openai);
    run(j);
  }
}

TEST_CASE("a provider error message that quotes the key is redacted") {
  Fixture fx;
  test::FakeLlmServer keyed(nullptr, "sk-right-key");
  auto s = fx.settings();
  s.endpoint = keyed.url("/v1");
  s.api_key = "sk-wrong-key-123456";
  LlmJudge j(s, fx.services.calls);
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kAuthError);  // its own outcome, not provider_error
  CHECK(r.attempts == 1);                           // 401: retrying cannot help
  // The fake quotes the key it refused, in full (OpenAI masks its middle).
  CHECK(r.verdict.justification ==
        "HTTP 401 invalid_request_error/invalid_api_key: Incorrect API key provided: "
        "[redacted].");
}

TEST_CASE("a provider's error message loses every secret, not only the exact key") {
  const std::string endpoint = "https://bob:pw-1234567@gw.example/v1?api-key=azk3y0123&v=2";
  const std::string message =
      "Key sk-mine-0123456789abcdefghij refused for azk3y0123 (user bob, pw-1234567); a proxy "
      "echoed Authorization: Bearer abcdefghijklmnopqrstuvwxyz and sk-proj-OtherKey0123456789AB.";
  CHECK(redactSecrets(message, "sk-mine-0123456789abcdefghij", endpoint) ==
        "Key [redacted] refused for [redacted] (user bob, [redacted]); a proxy echoed "
        "Authorization: [TOKEN_1] and [TOKEN_2].");
  // A secret that occurs inside "[redacted]" itself is replaced once (it looped for ever).
  CHECK(redactSecrets("key sk-abcdefgh12345678 refused", "sk-abcdefgh12345678",
                      "https://h/v1?mode=acted") == "key [redacted] refused");
  CHECK(redactKey("acted acted", "acted") == "[redacted] [redacted]");
  // A user name under 4 bytes stays (it would mask every "bob" of the text); nothing secret:
  // the text as it came.
  CHECK(redactSecrets("The server is overloaded.", "sk-x-0123456789", "https://h/v1") ==
        "The server is overloaded.");
}

TEST_CASE("model families for the self-judging count") {
  // OpenAI's chat models are one family; GPT-2 and EleutherAI's GPT-J are not in it.
  for (const char* m : {"gpt-4o-mini", "gpt-4", "GPT-3.5-turbo (instructed to hallucinate)",
                        "o3-mini", "openai/gpt-4o", "chatgpt-4o-latest", "gpt-5"}) {
    CAPTURE(m);
    CHECK(modelFamily(m) == "openai");
  }
  CHECK(modelFamily("gpt2") == "gpt2");
  CHECK(modelFamily("gpt-j-6b") == "gpt");
  CHECK(modelFamily("claude-3-5-haiku-latest") == "claude");
  CHECK(modelFamily("anthropic/claude-sonnet-4") == "claude");
  CHECK(modelFamily("mixtral-8x7b") == "mistral");
  CHECK(modelFamily("Meta-Llama-3-8B") == "llama");
  // The dev data's generators: none shares gpt-4o-mini's family except the GPT-3.5/4 answers.
  CHECK(modelFamily("t5") == "t5");
  CHECK(modelFamily("MemNet (WoW end-to-end generative)") == "memnet");
  CHECK(modelFamily("HotpotQA gold answer (human)") == "hotpotqa");
  CHECK(modelFamily("") == "");
}

namespace {

/// Every "Example reply: {…}" line of a system prompt, parsed.
std::vector<rapidjson::Document> exampleReplies(const std::string& system) {
  std::vector<rapidjson::Document> out;
  const std::string tag = "Example reply: ";
  for (auto at = system.find(tag); at != std::string::npos; at = system.find(tag, at + 1)) {
    const auto begin = at + tag.size();
    const auto end = system.find('\n', begin);
    out.emplace_back();
    out.back().Parse(system.substr(begin, end == std::string::npos ? end : end - begin).c_str());
  }
  return out;
}

/// The JSON data block between the marker lines of a user message.
rapidjson::Document dataBlock(const std::string& user) {
  const auto open = user.find("\n<<<ASSAY_DATA_");
  const auto first_nl = user.find('\n', open + 1);
  const auto close = user.find("\n<<<END_ASSAY_DATA_", first_nl);
  rapidjson::Document d;
  d.Parse(user.substr(first_nl + 1, close - first_nl - 1).c_str());
  return d;
}

std::vector<std::string> names(const rapidjson::Value& v) {
  std::vector<std::string> out;
  for (const auto& m : v.GetObject()) out.emplace_back(m.name.GetString());
  return out;
}

Event citedEvent(std::string id, std::string answer) {
  Event e;
  e.id = std::move(id);
  e.question = "How long do I have to return an item?";
  e.answer = std::move(answer);
  e.contexts = {{"policy-4.1", "Items can be returned within two weeks of delivery.",
                 "https://shop.example/returns"},
                {"faq-2", "Refunds are paid to the original card.", ""}};
  return e;
}

}  // namespace

TEST_CASE("prompt per criterion, as the provider receives it: fields, examples, cacheable system") {
  const std::map<std::string, std::vector<std::string>> needs = {
      {"faithfulness", {"question", "contexts", "answer"}},
      {"answer_relevancy", {"question", "answer"}},
      {"completeness", {"question", "contexts", "answer"}},
      {"context_relevance", {"question", "contexts"}}};
  for (const auto& need : needs) {
    const auto& criterion = need.first;  // a named variable: clang 14 cannot capture a binding
    const auto& fields = need.second;
    CAPTURE(criterion);
    Fixture fx;
    auto s = fx.settings();
    s.name = criterion + "_llm";
    s.rubric = *builtinRubric(criterion);
    LlmJudge j(s, fx.services.calls);
    const auto a = run(j, citedEvent("a", "Within 14 days [policy-4.1]."));
    CHECK(a.verdict.outcome == Outcome::kOk);
    const auto first = fx.lastRequest();
    const auto b = run(j, citedEvent("b", "You have a month, and we pay the return shipping."));
    CHECK(b.verdict.outcome == Outcome::kOk);
    const auto second = fx.lastRequest();
    REQUIRE_FALSE(first.HasParseError());
    REQUIRE_FALSE(second.HasParseError());
    if (const char* dir = std::getenv("ASSAY_DUMP_PROMPTS"))  // the report's examples
      std::ofstream(std::string(dir) + "/" + criterion + ".json")
          << first["messages"][0]["content"].GetString() << "\n----- user -----\n"
          << first["messages"][1]["content"].GetString() << "\n";
    // The system prompt: byte-identical across the two events (prompt caching).
    const std::string system = first["messages"][0]["content"].GetString();
    CHECK(system == std::string(second["messages"][0]["content"].GetString()));
    // Its four examples' replies are valid JSON, the claim only for faithfulness.
    const auto replies = exampleReplies(system);
    REQUIRE(replies.size() == 4);
    for (std::size_t i = 0; i < replies.size(); ++i) {
      REQUIRE_FALSE(replies[i].HasParseError());
      CHECK(replies[i]["score"].GetInt() == static_cast<int>(i) + 1);
      CHECK(names(replies[i]).front() == "justification");
      CHECK(replies[i].HasMember("unsupported_claim") == (criterion == "faithfulness"));
    }
    // The user message carries exactly the fields the criterion needs.
    const std::string user = first["messages"][1]["content"].GetString();
    const auto data = dataBlock(user);
    REQUIRE_FALSE(data.HasParseError());
    CHECK(names(data) == fields);
    if (data.HasMember("contexts")) {
      CHECK(std::string(data["contexts"][0]["id"].GetString()) == "policy-4.1");
      CHECK(std::string(data["contexts"][0]["source"].GetString()) ==
            "https://shop.example/returns");
      CHECK(std::string(data["contexts"][1]["id"].GetString()) == "faq-2");
    }
    CHECK((user.find("Within 14 days") != std::string::npos) == (criterion != "context_relevance"));
    CHECK(
        user.ends_with("Judge only " + criterion + " (1-4), and reply with the JSON object only."));
    // The reply is constrained by the API: json_schema strict, justification first.
    const auto& format = first["response_format"];
    CHECK(std::string(format["type"].GetString()) == "json_schema");
    CHECK(format["json_schema"]["strict"].IsTrue());
    const auto& props = format["json_schema"]["schema"]["properties"];
    CHECK(names(props).front() == "justification");
    CHECK(props.HasMember("unsupported_claim") == (criterion == "faithfulness"));
    CHECK(first["temperature"].GetInt() == 0);
  }
}

TEST_CASE(
    "Anthropic: a forced tool carries the reply schema; the tool call's input is the verdict") {
  Fixture fx;
  LlmJudge j(fx.settings(Provider::kAnthropic), fx.services.calls);
  fx.script(R"([{"score": 2}])");
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kOk);
  CHECK(r.verdict.score == 2);
  const auto body = fx.lastRequest();
  CHECK(std::string(body["tools"][0]["name"].GetString()) == "verdict");
  CHECK(names(body["tools"][0]["input_schema"]["properties"]) ==
        std::vector<std::string>{"justification", "unsupported_claim", "score"});
  CHECK(std::string(body["tool_choice"]["type"].GetString()) == "tool");
  CHECK(std::string(body["tool_choice"]["name"].GetString()) == "verdict");
  // Streamed, the tool input arrives as input_json_delta parts.
  fx.script(R"([{"kind": "stream", "score": 4}])");
  CHECK(run(j).verdict.score == 4);
  // JSON mode: no tool, the prompt's rule only.
  auto s = fx.settings(Provider::kAnthropic);
  s.reply_format = ReplyFormat::Kind::kJsonObject;
  LlmJudge plain(s, fx.services.calls);
  fx.script(R"([{"score": 3}])");
  CHECK(run(plain).verdict.score == 3);
  CHECK_FALSE(fx.lastRequest().HasMember("tools"));
}

TEST_CASE("reply_format json_object: OpenAI JSON mode, the fallback") {
  Fixture fx;
  auto s = fx.settings();
  s.reply_format = ReplyFormat::Kind::kJsonObject;
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"score": 3}])");
  CHECK(run(j).verdict.score == 3);
  CHECK(std::string(fx.lastRequest()["response_format"]["type"].GetString()) == "json_object");
}

TEST_CASE("{\"score\": null} with a justification is abstained; claims only for faithfulness") {
  Fixture fx;
  LlmJudge j(fx.settings(), fx.services.calls);
  fx.script(
      R"([{"content": "{\"justification\": \"The answer is empty.\", \"unsupported_claim\": null, \"score\": null}"}])");
  const auto r = run(j);
  CHECK(r.verdict.outcome == Outcome::kAbstained);
  CHECK(r.verdict.justification == "The answer is empty.");
  CHECK_FALSE(r.verdict.score.has_value());
  CHECK(r.cost_eur > 0.0);  // a billed answer
  // Through the Judge interface: no score, the reason as evidence.
  fx.script(R"([{"content": "{\"justification\": \"Nothing to judge.\", \"score\": null}"}])");
  Event e = event();
  e.id = "abstain-2";
  const auto v = j.judge(e);
  CHECK(v.outcome == Outcome::kAbstained);
  CHECK(v.evidence == "Nothing to judge.");
  // An answer_relevancy verdict never reports an unsupported claim, even if the model sends one.
  auto s = fx.settings();
  s.name = "relevancy_llm";
  s.rubric = *builtinRubric("answer_relevancy");
  LlmJudge rel(s, fx.services.calls);
  fx.script(
      R"([{"content": "{\"justification\": \"Direct.\", \"unsupported_claim\": \"None\", \"score\": 4}"}, {"content": "{\"justification\": \"Direct.\", \"unsupported_claim\": \"x\", \"score\": 4}"}])");
  e.id = "rel-1";
  CHECK(rel.judge(e).evidence == "Direct.");
  e.id = "rel-2";
  CHECK(rel.judge(e).evidence == "Direct.");
  // faithfulness does.
  fx.script(
      R"([{"content": "{\"justification\": \"The date differs.\", \"unsupported_claim\": \"in 2021\", \"score\": 1}"}])");
  e.id = "faith-claim";
  CHECK(j.judge(e).evidence == "The date differs. Unsupported: in 2021");
}

TEST_CASE("a faithfulness score from trimmed contexts is contexts_trimmed unless score_trimmed") {
  Fixture fx;
  Event e = event();
  const std::string chunk(6000, 'x');  // about 2,000 estimated tokens
  e.contexts = {{"1", "The warranty lasts two years.", ""}, {"2", chunk, ""}, {"3", chunk, ""}};
  auto s = fx.settings();
  s.max_input_tokens = 3000;  // the system prompt (~1,800) + context 1, not contexts 2 and 3
  LlmJudge j(s, fx.services.calls);
  fx.script(R"([{"score": 2}])");
  const auto r = run(j, e);
  CHECK(r.contexts_truncated);
  CHECK(r.verdict.outcome == Outcome::kContextsTrimmed);
  CHECK_FALSE(r.verdict.score.has_value());
  // The fake provider's justification names the prompt: "Fake verdict of prompt <FNV-1a>."
  CHECK(r.verdict.justification.rfind(
            "[score 2 on contexts 1-1 of 3, the others left out to fit max_input_tokens] Fake "
            "verdict of prompt ",
            0) == 0);
  const std::string user = fx.lastRequest()["messages"][1]["content"].GetString();
  CHECK(user.find("The contexts of rank 2 and 3 (of 3) were left out") != std::string::npos);
  s.score_trimmed = true;
  s.name = "faith_scored";
  LlmJudge scored(s, fx.services.calls);
  fx.script(R"([{"score": 2}])");
  const auto t = run(scored, e);
  CHECK(t.verdict.outcome == Outcome::kOk);
  CHECK(t.verdict.score == 2);
  CHECK(t.contexts_truncated);
  // Another criterion judges what it was shown (its verdict carries contexts_truncated).
  s.score_trimmed = false;
  s.name = "completeness_llm";
  s.rubric = *builtinRubric("completeness");
  LlmJudge comp(s, fx.services.calls);
  fx.script(R"([{"score": 3}])");
  CHECK(run(comp, e).verdict.outcome == Outcome::kOk);
}

TEST_CASE("a custom criterion on a 0-3 scale: its schema, its inputs, its outcomes") {
  Fixture fx;
  auto s = fx.settings();
  s.name = "charter_llm";
  s.rubric = Rubric{};
  s.rubric.criterion = "response_charter";
  s.rubric.task = "Judge whether the answer keeps the charter.";
  s.rubric.custom = true;
  s.rubric.needs_question = s.rubric.needs_contexts = s.rubric.needs_answer = true;
  s.rubric.needs_reference = true;
  s.rubric.fields = {"/metadata/channel"};
  s.rubric.levels = {{0, "broken", "A rule is broken."},
                     {1, "strays", "A lapse."},
                     {2, "mostly kept", "Minor."},
                     {3, "kept", "Kept."}};
  LlmJudge j(s, fx.services.calls);
  Event e = event();
  e.reference = "Two years from delivery.";
  e.fields = {{"/metadata/channel", "chat"}};
  // The bottom of the scale is a score like any other.
  fx.script(R"([{"score": 0}])");
  auto r = run(j, e);
  REQUIRE(r.verdict.outcome == Outcome::kOk);
  CHECK(r.verdict.score == 0);
  const auto body = fx.lastRequest();
  const auto& score = body["response_format"]["json_schema"]["schema"]["properties"]["score"];
  std::vector<int> allowed;
  for (const auto& v : score["anyOf"][0]["enum"].GetArray()) allowed.push_back(v.GetInt());
  CHECK(allowed == std::vector<int>{0, 1, 2, 3});
  const auto data = dataBlock(body["messages"][1]["content"].GetString());
  REQUIRE_FALSE(data.HasParseError());
  CHECK(names(data) == std::vector<std::string>{"question", "contexts", "reference",
                                                "/metadata/channel", "answer"});
  CHECK(std::string(data["/metadata/channel"].GetString()) == "chat");
  // A score off the scale is a schema error; an unscripted reply keeps to the schema's enum.
  fx.script(R"([{"score": 4}])");
  CHECK(run(j, e).verdict.outcome == Outcome::kSchemaError);
  std::set<double> seen;
  for (int i = 0; i < 24; ++i) {
    Event v = e;
    v.answer = "Answer number " + std::to_string(i) + ".";
    const auto ok = run(j, v);
    REQUIRE(ok.verdict.outcome == Outcome::kOk);
    seen.insert(*ok.verdict.score);
  }
  CHECK(seen == std::set<double>{0, 1, 2, 3});
  // Missing inputs end before any call.
  const long before = fx.requests();
  Event no_ref = e;
  no_ref.reference.reset();
  CHECK(run(j, no_ref).verdict.outcome == Outcome::kNoReference);
  Event no_field = e;
  no_field.fields.clear();
  const auto na = run(j, no_field);
  CHECK(na.verdict.outcome == Outcome::kNotApplicable);
  CHECK(na.verdict.justification == "the event has no value at /metadata/channel (rubric.inputs)");
  CHECK(fx.requests() == before);
}

TEST_CASE("budget.tenants and apps: a tenant over its cap is skipped_budget, the others go on") {
  // Issue 31, "Budgets per tenant": reserved before the call with the global and per-judge
  // caps, in the same store (a real redis-server), exact: a call is made only when its worst
  // case fits, so the tenant's spend never passes its cap.
  test::RedisServer redis;
  test::FakeLlmServer server;
  HttpClient client;
  Services services(redis.url());
  auto s = [&] {
    Fixture fx;  // settings only (its own server and services are not used)
    auto v = fx.settings();
    v.endpoint = server.url("/v1");
    return v;
  }();
  constexpr double kAcmeCap = 0.0004;
  s.tenant_caps = {{"acme", kAcmeCap}, {"*", 1.0}};
  s.app_caps = {{"checkout", 0.5}};
  HttpRequest script;
  script.url = server.url("/_fake/script");
  std::string replies = "[";
  for (int i = 0; i < 40; ++i) replies += std::string(i ? "," : "") + R"({"score": 3})";
  script.body = replies + "]";
  REQUIRE(client.send(script).status == 200);
  LlmJudge j(s, services.calls);
  const auto as = [](const char* tenant, const char* app) {
    Event e = event();
    e.tenant = tenant;
    e.app = app;
    return e;
  };
  std::map<std::string, std::map<Outcome, int>> outcomes;
  std::string exhausted_scope;
  for (int i = 0; i < 12; ++i) {
    const auto r = run(j, as("acme", "checkout"));
    ++outcomes["acme"][r.verdict.outcome];
    if (r.verdict.outcome == Outcome::kSkippedBudget) exhausted_scope = r.exhausted_scope;
    ++outcomes["globex"][run(j, as("globex", "")).verdict.outcome];
  }
  ++outcomes["none"][run(j, as("", "")).verdict.outcome];  // no tenant: "none", under "*"
  CHECK(outcomes["acme"][Outcome::kOk] >= 1);
  CHECK(outcomes["acme"][Outcome::kSkippedBudget] >= 1);
  CHECK(outcomes["acme"][Outcome::kOk] + outcomes["acme"][Outcome::kSkippedBudget] == 12);
  CHECK(exhausted_scope == "tenant:acme");
  CHECK(outcomes["globex"][Outcome::kOk] == 12);  // the others go on
  CHECK(outcomes["none"][Outcome::kOk] == 1);
  // The spend per scope, from the store every instance shares.
  auto& store = services.store();
  const std::string day = budgetDay("UTC", epochMs());
  const auto acme = store.spent("tenant:acme", day);
  const auto globex = store.spent("tenant:globex", day);
  const auto global = store.spent("global", day);
  CHECK(acme.spent_eur > 0);
  CHECK(acme.spent_eur <= kAcmeCap);  // never past its cap
  CHECK(acme.outstanding_eur == 0);
  CHECK(globex.spent_eur > 0);
  CHECK(store.spent("tenant:none", day).spent_eur > 0);
  CHECK(store.spent("app:checkout", day).spent_eur == doctest::Approx(acme.spent_eur));
  CHECK(global.spent_eur == doctest::Approx(acme.spent_eur + globex.spent_eur +
                                            store.spent("tenant:none", day).spent_eur));
  MESSAGE("tenant:acme spent EUR " << acme.spent_eur << " of its EUR " << kAcmeCap << " cap in "
                                   << outcomes["acme"][Outcome::kOk] << " calls; "
                                   << outcomes["acme"][Outcome::kSkippedBudget]
                                   << " skipped_budget; globex 12 of 12 judged");
  // Their series: named tenants from the start, "*" ones on first use.
  services.calls.refresh();
  services.calls.ledger().sync();
  std::set<std::string> scopes;
  for (const auto& f : services.registry.Collect())
    if (f.name == "assay_budget_limit_euros")
      for (const auto& m : f.metric)
        for (const auto& l : m.label)
          if (l.name == "scope") scopes.insert(l.value);
  CHECK(scopes == std::set<std::string>{"global", "tenant:acme", "app:checkout", "tenant:globex",
                                        "tenant:none"});
}

TEST_CASE("budget.tenants: a reload that drops a tenant's cap drops its series") {
  // From the hostile trial: after {acme, beta} → {gamma}, acme and beta still showed their old
  // caps on /metrics though they had none any more.
  Fixture fx;
  const auto scopes = [&] {
    std::set<std::string> out;
    for (const auto& f : fx.services.registry.Collect())
      if (f.name == "assay_budget_limit_euros")
        for (const auto& m : f.metric)
          for (const auto& l : m.label)
            if (l.name == "scope") out.insert(l.value);
    return out;
  };
  auto s = fx.settings();
  s.tenant_caps = {{"acme", 0.5}, {"beta", 1}};
  auto before = std::make_unique<LlmJudge>(s, fx.services.calls);
  CHECK(scopes() == std::set<std::string>{"global", "tenant:acme", "tenant:beta"});
  s.tenant_caps = {{"gamma", 2}};
  LlmJudge after(s, fx.services.calls);  // the reload's judge
  CHECK(scopes() == std::set<std::string>{"global", "tenant:gamma"});
  s.tenant_caps = {{"*", 1}};  // "*" caps every tenant: nothing is dropped
  LlmJudge star(s, fx.services.calls);
  CHECK(scopes() == std::set<std::string>{"global", "tenant:gamma"});
}
