#include "judges/llm/provider.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include "fake_server.hpp"
#include "judges/llm/rubric.hpp"

using namespace assay;
using namespace assay;
using namespace assay::llm;
using namespace std::chrono_literals;

namespace {
Prompt prompt() {
  Event e;
  e.question = std::string("How long is the warranty?");
  e.answer = std::string("Two years.");
  e.contexts.push_back(Context{"1", "The warranty lasts two years.", ""});
  return *buildPrompt(*builtinRubric("faithfulness"), e, 100000);
}
}  // namespace

TEST_CASE("OpenAI request: URL, auth, temperature 0, JSON mode") {
  const auto r = buildRequest(Provider::kOpenAi, "https://api.openai.com/v1/", "sk-test",
                              "gpt-4o-mini", prompt(), 256);
  CHECK(r.url == "https://api.openai.com/v1/chat/completions");
  CHECK(r.headers.at(0) == std::pair<std::string, std::string>{"Authorization", "Bearer sk-test"});
  rapidjson::Document d;
  d.Parse(r.body.c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(std::string(d["model"].GetString()) == "gpt-4o-mini");
  CHECK(d["temperature"].GetInt() == 0);
  CHECK(d["max_tokens"].GetInt() == 256);
  CHECK(std::string(d["response_format"]["type"].GetString()) == "json_object");
  CHECK(std::string(d["messages"][0]["role"].GetString()) == "system");
  CHECK(std::string(d["messages"][1]["role"].GetString()) == "user");
}

TEST_CASE("Anthropic request: URL with or without /v1, headers, system prompt") {
  const auto a = buildRequest(Provider::kAnthropic, "https://api.anthropic.com", "k",
                              "claude-3-5-haiku-20241022", prompt(), 300);
  CHECK(a.url == "https://api.anthropic.com/v1/messages");
  const auto b =
      buildRequest(Provider::kAnthropic, "https://gw.example/v1", "k", "m", prompt(), 300);
  CHECK(b.url == "https://gw.example/v1/messages");
  CHECK(a.headers.at(0).first == "x-api-key");
  CHECK(a.headers.at(1) == std::pair<std::string, std::string>{"anthropic-version", "2023-06-01"});
  rapidjson::Document d;
  d.Parse(a.body.c_str());
  CHECK(d["temperature"].GetInt() == 0);
  CHECK(std::string(d["system"].GetString()).find("faithfulness") != std::string::npos);
  CHECK(d["messages"].Size() == 1);
}

TEST_CASE("replies and error bodies of both APIs") {
  const auto ok = parseReply(
      Provider::kOpenAi, 200,
      R"({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"{\"score\":3,\"justification\":\"j\"}","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":950,"completion_tokens":40,"total_tokens":990,"prompt_tokens_details":null,"completion_tokens_details":null}})");
  REQUIRE(ok.ok);
  CHECK(ok.finish == FinishReason::kStop);
  CHECK(ok.content == "{\"score\":3,\"justification\":\"j\"}");
  REQUIRE(ok.usage.has_value());
  CHECK(ok.usage->prompt_tokens == 950);
  CHECK(ok.usage->completion_tokens == 40);
  const auto cut =
      parseReply(Provider::kOpenAi, 200,
                 R"({"choices":[{"message":{"content":"{\"sco"},"finish_reason":"length"}]})");
  CHECK(cut.finish == FinishReason::kLength);
  CHECK_FALSE(cut.usage.has_value());
  const auto refusal = parseReply(
      Provider::kOpenAi, 200,
      R"({"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]})");
  CHECK(refusal.finish == FinishReason::kRefusal);
  const auto rl = parseReply(
      Provider::kOpenAi, 429,
      R"({"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}})");
  CHECK_FALSE(rl.ok);
  CHECK(rl.error_type == "requests");
  const auto a = parseReply(
      Provider::kAnthropic, 200,
      R"({"id":"msg","type":"message","content":[{"type":"text","text":"{\"score\": 2, "},{"type":"text","text":"\"justification\": \"j\"}"}],"stop_reason":"end_turn","usage":{"input_tokens":900,"output_tokens":30,"cache_read_input_tokens":100,"cache_creation_input_tokens":0}})");
  REQUIRE(a.ok);
  CHECK(a.content == "{\"score\": 2, \"justification\": \"j\"}");
  REQUIRE(a.usage.has_value());
  CHECK(a.usage->prompt_tokens == 1000);
  CHECK(a.usage->cached_prompt_tokens == 100);
  const auto max = parseReply(
      Provider::kAnthropic, 200,
      R"({"content":[{"type":"text","text":"{"}],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":1}})");
  CHECK(max.finish == FinishReason::kLength);
  const auto over =
      parseReply(Provider::kAnthropic, 529,
                 R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  CHECK(over.overloaded);
  CHECK_FALSE(parseReply(Provider::kOpenAi, 200, "<html>gateway</html>").ok);
  CHECK(parseReply(Provider::kOpenAi, 502, "<html>bad gateway</html>").error_type == "http_502");
}

TEST_CASE("against the fake provider over HTTPS: verdicts, fences, truncation, bad scores") {
  assay::test::TestCa ca;
  assay::test::FakeLlmServer server(&ca, "sk-test");
  HttpClient client(HttpClientOptions{ca.caFile(), true, 4});
  const std::string base = server.url("/v1");
  auto call = [&](Provider p, const std::string& script) {
    HttpRequest s;
    s.url = server.url("/_fake/script");
    s.body = script;
    REQUIRE(client.send(s).status == 200);
    auto req = buildRequest(p, base, "sk-test", "gpt-4o-mini", prompt(), 200);
    req.timeout = 5s;
    const auto res = client.send(req);
    return parseReply(p, res.status, res.body);
  };
  for (Provider p : {Provider::kOpenAi, Provider::kAnthropic}) {
    CAPTURE(static_cast<int>(p));
    const auto plain = call(p, R"([{"score": 2}])");
    REQUIRE(plain.ok);
    CHECK(parseVerdict(plain.content, plain.finish, 1, 4).score == 2);
    REQUIRE(plain.usage.has_value());
    CHECK(plain.usage->prompt_tokens > 100);

    const auto fenced = call(p, R"([{"kind": "fenced", "score": 4}])");
    CHECK(parseVerdict(fenced.content, fenced.finish, 1, 4).score == 4);  // no retry needed

    const auto cut = call(p, R"([{"kind": "truncated"}])");
    CHECK(parseVerdict(cut.content, cut.finish, 1, 4).outcome == Outcome::kTruncated);
    REQUIRE(cut.usage.has_value());  // a truncated reply is still charged
    CHECK(cut.usage->completion_tokens > 0);

    const auto slash =
        call(p, R"([{"content": "{\"score\": \"3/4\", \"justification\": \"x\"}"}])");
    CHECK(parseVerdict(slash.content, slash.finish, 1, 4).outcome == Outcome::kSchemaError);
    const auto digits = call(p, R"([{"content": "{\"score\": \"3\", \"justification\": \"x\"}"}])");
    CHECK(parseVerdict(digits.content, digits.finish, 1, 4).score == 3);
  }
  // Wrong key: 401 with the provider's error body.
  auto bad = buildRequest(Provider::kOpenAi, base, "sk-wrong", "gpt-4o-mini", prompt(), 200);
  const auto res = client.send(bad);
  CHECK(res.status == 401);
  CHECK(parseReply(Provider::kOpenAi, res.status, res.body).error_type == "invalid_request_error");
}

TEST_CASE("a provider body nested 600,000 deep is no JSON object: bad_response, never a crash") {
  const std::string deep = "{\"choices\": " + std::string(600'000, '[') + "}";
  const auto ok_status = parseReply(Provider::kOpenAi, 200, deep);
  CHECK_FALSE(ok_status.ok);
  CHECK(ok_status.error_type == "bad_response");
  const auto error_status = parseReply(Provider::kAnthropic, 500, deep);
  CHECK(error_status.error_type == "http_500");
}
