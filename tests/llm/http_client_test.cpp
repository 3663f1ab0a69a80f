#include "judges/llm/http_client.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "fake_server.hpp"
#include "tests/wait.hpp"

using namespace assay::llm;
using assay::test::FakeLlmServer;
using assay::test::TestCa;
using namespace std::chrono_literals;

namespace {
HttpRequest chat(
    const std::string& url,
    std::string body = R"({"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]})") {
  HttpRequest r;
  r.url = url;
  r.body = std::move(body);
  r.timeout = 5s;
  return r;
}
}  // namespace

TEST_CASE("HTTPS with a private CA: verified, kept alive, reused") {
  TestCa ca;
  FakeLlmServer server(&ca);
  HttpClient client(HttpClientOptions{ca.caFile(), true, 4});
  const auto a = client.send(chat(server.url("/v1/chat/completions")));
  INFO(a.error);
  REQUIRE(a.status == 200);
  CHECK(a.body.find("\"finish_reason\":\"stop\"") != std::string::npos);
  CHECK(a.headers.at("content-type") == "application/json");
  CHECK_FALSE(a.reused_connection);
  const auto b = client.send(chat(server.url("/v1/chat/completions")));
  CHECK(b.status == 200);
  CHECK(b.reused_connection);  // keep-alive pool
}

TEST_CASE("certificate and host-name verification are on by default") {
  TestCa ca;
  FakeLlmServer server(&ca);
  {
    HttpClient system_store;  // the test CA is not trusted by the system
    const auto r = system_store.send(chat(server.url("/v1/chat/completions")));
    CHECK(r.status == 0);
    CHECK_FALSE(r.error.empty());
    MESSAGE("untrusted CA: " << r.error);
  }
  {
    // The certificate names "localhost"; connecting by IP must fail host-name verification.
    HttpClient client(HttpClientOptions{ca.caFile(), true, 4});
    const auto r = client.send(
        chat("https://127.0.0.1:" + std::to_string(server.port()) + "/v1/chat/completions"));
    CHECK(r.status == 0);
    CHECK_FALSE(r.error.empty());
    MESSAGE("wrong host name: " << r.error);
  }
}

TEST_CASE("plain HTTP, error statuses and Retry-After reach the caller") {
  FakeLlmServer server;
  HttpClient client;
  const auto r = client.send(chat(
      server.url("/v1/chat/completions"),
      R"({"model":"m","messages":[{"role":"user","content":"[[fake-status:429]] [[fake-retry-after:45]]"}]})"));
  CHECK(r.status == 429);
  CHECK(r.headers.at("retry-after") == "45");
  CHECK(r.body.find("rate_limit_exceeded") != std::string::npos);
  const auto nf = client.send(chat(server.url("/nope")));
  CHECK(nf.status == 404);
}

TEST_CASE("a slow reply times out within the deadline; a closed port fails fast") {
  FakeLlmServer server;
  HttpClient client;
  auto req =
      chat(server.url("/v1/chat/completions"),
           R"({"model":"m","messages":[{"role":"user","content":"[[fake-delay-ms:3000]]"}]})");
  req.timeout = 300ms;
  const auto r = client.send(req);
  CHECK(r.status == 0);
  CHECK(r.timed_out);
  CHECK(r.elapsed >= 300ms);
  // Separates the 300 ms timeout from the reply 3 s later: the timer fires well within the gap
  // on a loaded machine (docs/testing.md, "Timing").
  MESSAGE("the 300 ms timeout ended the call after ",
          std::chrono::duration_cast<std::chrono::milliseconds>(r.elapsed).count(), " ms");
  CHECK(r.elapsed < 2000ms);
  // After a timeout the client still works (the timed-out connection is not pooled).
  CHECK(client.send(chat(server.url("/v1/chat/completions"))).status == 200);

  const auto refused = client.send(chat("http://127.0.0.1:1/v1/chat/completions"));
  CHECK(refused.status == 0);
  CHECK_FALSE(refused.timed_out);
  CHECK_FALSE(refused.error.empty());
  CHECK(client.send(chat("ftp://x/y")).error.find("invalid URL") == 0);
}

TEST_CASE("many concurrent requests on one client") {
  FakeLlmServer server;
  HttpClient client(HttpClientOptions{"", true, 8});
  std::atomic<int> ok{0}, done{0};
  for (int i = 0; i < 64; ++i) {
    client.submit(chat(server.url("/v1/chat/completions")), [&](HttpResponse r) {
      if (r.status == 200) ++ok;
      ++done;
    });
  }
  CHECK(assay::test::waitUntil("64 replies", [&] { return done == 64; }));
  CHECK(ok == 64);
}
