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
  CHECK(rl.error_type == "requests/rate_limit_exceeded");
  CHECK(rl.effective_status == 429);
  CHECK_FALSE(rl.permanent);
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
  HttpClient client(HttpClientOptions{ca.caFile(), true, 4, {}});
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
  CHECK(parseReply(Provider::kOpenAi, res.status, res.body).error_type ==
        "invalid_request_error/invalid_api_key");
}

TEST_CASE("a provider body nested 600,000 deep is no JSON object: bad_response, never a crash") {
  const std::string deep = "{\"choices\": " + std::string(600'000, '[') + "}";
  const auto ok_status = parseReply(Provider::kOpenAi, 200, deep);
  CHECK_FALSE(ok_status.ok);
  CHECK(ok_status.error_type == "bad_response");
  const auto error_status = parseReply(Provider::kAnthropic, 500, deep);
  CHECK(error_status.error_type == "http_500");
}

TEST_CASE("error objects in a 2xx body stand for the status their code or type names") {
  // OpenRouter: HTTP 200, a numeric code.
  const auto router = parseReply(
      Provider::kOpenAi, 200,
      R"({"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"x"}},"user_id":"u"})");
  CHECK_FALSE(router.ok);
  CHECK(router.effective_status == 429);
  CHECK(router.error_type == "429");
  CHECK(router.error_message == "Provider returned error");
  // Anthropic's error event shape in a 200 (a proxy that ends a stream with it).
  const auto over =
      parseReply(Provider::kAnthropic, 200,
                 R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  CHECK(over.effective_status == 529);
  CHECK(over.overloaded);
  CHECK(parseReply(Provider::kAnthropic, 200,
                   R"({"type":"error","error":{"type":"api_error","message":"x"}})")
            .effective_status == 500);
  CHECK(parseReply(Provider::kAnthropic, 200,
                   R"({"type":"error","error":{"type":"authentication_error","message":"x"}})")
            .effective_status == 401);
  CHECK(parseReply(Provider::kOpenAi, 200, R"({"error":{"type":"invalid_request_error"}})")
            .effective_status == 400);
  // A bare string, vLLM's error object, FastAPI's detail.
  const auto bare = parseReply(Provider::kOpenAi, 200, R"({"error":"upstream timed out"})");
  CHECK(bare.effective_status == 500);
  CHECK(bare.error_message == "upstream timed out");
  const auto vllm = parseReply(
      Provider::kOpenAi, 200,
      R"({"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400})");
  CHECK(vllm.effective_status == 400);
  CHECK(vllm.error_type == "BadRequestError/400");
  CHECK(parseReply(Provider::kOpenAi, 422, R"({"detail":"Not authenticated"})").error_message ==
        "Not authenticated");
  // "error": null is no error (OpenAI's Responses-style objects carry it).
  CHECK(
      parseReply(Provider::kOpenAi, 200,
                 R"({"error":null,"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]})")
          .ok);
  // Error messages are clipped to 300 bytes, never inside a UTF-8 sequence.
  std::string long_msg;
  for (int i = 0; i < 200; ++i) long_msg += "\xC3\xA9";  // é
  const auto clipped =
      parseReply(Provider::kOpenAi, 500, R"({"error":{"message":")" + long_msg + "\"}}");
  CHECK(clipped.error_message.size() == 300 + 3);  // 150 é and the ellipsis
  CHECK(clipped.error_message.substr(0, 300) == long_msg.substr(0, 300));
}

TEST_CASE("quota, content filters and empty choices") {
  const auto quota = parseReply(
      Provider::kOpenAi, 429,
      R"({"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
  CHECK(quota.effective_status == 429);
  CHECK(quota.permanent);  // a 429 that retrying cannot cure
  const auto azure = parseReply(
      Provider::kOpenAi, 400,
      R"({"error":{"message":"The response was filtered","type":null,"param":"prompt","code":"content_filter","status":400}})");
  CHECK(azure.refused);
  CHECK(azure.error_type == "content_filter");
  const auto prompt_filtered = parseReply(
      Provider::kOpenAi, 200,
      R"({"choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false},"violence":{"filtered":true,"severity":"high"}}}],"usage":{"prompt_tokens":12,"completion_tokens":0}})");
  CHECK_FALSE(prompt_filtered.ok);
  CHECK(prompt_filtered.refused);
  REQUIRE(prompt_filtered.usage.has_value());
  CHECK(prompt_filtered.usage->prompt_tokens == 12);
  const auto empty = parseReply(
      Provider::kOpenAi, 200,
      R"({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10}})");
  CHECK_FALSE(empty.ok);
  CHECK(empty.error_type == "bad_response");
  CHECK(empty.effective_status == 502);
  REQUIRE(empty.usage.has_value());  // charged what it reports
  CHECK(empty.usage->prompt_tokens == 10);
  // Content as an array of text parts (gateways).
  const auto parts = parseReply(
      Provider::kOpenAi, 200,
      R"({"choices":[{"message":{"content":[{"type":"text","text":"{\"score\": 2, "},{"type":"text","text":"\"justification\": \"j\"}"}]},"finish_reason":"stop"}]})");
  REQUIRE(parts.ok);
  CHECK(parseVerdict(parts.content, parts.finish, 1, 4).score == 2);
  // Invalid UTF-8 in a 2xx body: not readable.
  CHECK(
      parseReply(Provider::kOpenAi, 200,
                 "{\"choices\":[{\"message\":{\"content\":\"\xFF\"},\"finish_reason\":\"stop\"}]}")
          .error_type == "bad_response");
}

TEST_CASE("server-sent-event streams are assembled into the reply they stand for") {
  const std::string openai =
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
      "\"finish_reason\":null}]}\n\n"
      ": keep-alive comment\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"score\\\": 3, \"},"
      "\"finish_reason\":null}]}\r\n\r\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\\"justification\\\": "
      "\\\"j\\\"}\"},\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":20,"
      "\"total_tokens\":920}}\n\n"
      "data: [DONE]\n\n";
  const auto o = parseReply(Provider::kOpenAi, 200, openai);
  REQUIRE(o.ok);
  CHECK(o.content == R"({"score": 3, "justification": "j"})");
  CHECK(o.finish == FinishReason::kStop);
  REQUIRE(o.usage.has_value());
  CHECK(o.usage->prompt_tokens == 900);
  CHECK(o.usage->completion_tokens == 20);
  // Cut before its end: a bad gateway, retryable, nothing reported.
  const auto cut =
      parseReply(Provider::kOpenAi, 200,
                 openai.substr(0, openai.find("data: {\"choices\":[{\"index\":0,\"delta\":{},")));
  CHECK_FALSE(cut.ok);
  CHECK(cut.error_type == "stream_incomplete");
  CHECK(cut.effective_status == 502);
  CHECK_FALSE(cut.usage.has_value());
  // A refusal delta.
  const auto refusal = parseReply(
      Provider::kOpenAi, 200,
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I "
      "can't\"},\"finish_reason\":null}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: "
      "[DONE]\n\n");
  REQUIRE(refusal.ok);
  CHECK(refusal.finish == FinishReason::kRefusal);

  const std::string anthropic =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\","
      "\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":8000,"
      "\"cache_read_input_tokens\":0,\"output_tokens\":1}}}\n\n"
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
      "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
      "event: ping\ndata: {\"type\": \"ping\"}\n\n"
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"{\\\"score\\\": 4, \\\"justification\\\": "
      "\"}}\n\n"
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"\\\"ok\\\"}\"}}\n\n"
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
      "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":400}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  const auto a = parseReply(Provider::kAnthropic, 200, anthropic);
  REQUIRE(a.ok);
  CHECK(a.content == R"({"score": 4, "justification": "ok"})");
  REQUIRE(a.usage.has_value());
  CHECK(a.usage->prompt_tokens == 8025);
  CHECK(a.usage->cache_write_prompt_tokens == 8000);
  CHECK(a.usage->completion_tokens == 400);  // message_delta's cumulative count
  // Cut after message_start: the input tokens it reported are charged; not retried (billed).
  const auto a_cut =
      parseReply(Provider::kAnthropic, 200, anthropic.substr(0, anthropic.find("event: ping")));
  CHECK_FALSE(a_cut.ok);
  CHECK(a_cut.error_type == "stream_incomplete");
  REQUIRE(a_cut.usage.has_value());
  CHECK(a_cut.usage->prompt_tokens == 8025);
  CHECK(a_cut.usage->completion_tokens == 1);
  // An error event in the middle of the stream.
  const auto a_err = parseReply(
      Provider::kAnthropic, 200,
      anthropic.substr(0, anthropic.find("event: ping")) +
          "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
          "\"message\":\"Overloaded\"}}\n\n");
  CHECK_FALSE(a_err.ok);
  CHECK(a_err.overloaded);
  CHECK(a_err.effective_status == 529);
  // Before any content (right after message_start): nothing was produced, nothing is charged,
  // so the call is retried (issue 29: it was charged message_start's input and not retried).
  CHECK_FALSE(a_err.usage.has_value());
  // After content, what the stream reported stands.
  const std::string overloaded =
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
      "\"message\":\"Overloaded\"}}\n\n";
  const auto late_err =
      parseReply(Provider::kAnthropic, 200,
                 anthropic.substr(0, anthropic.find("event: message_delta")) + overloaded);
  CHECK_FALSE(late_err.ok);
  REQUIRE(late_err.usage.has_value());
  CHECK(late_err.usage->prompt_tokens == 8025);
  // A stream event that is not JSON, or nested beyond the bound.
  CHECK(parseReply(Provider::kOpenAi, 200, "data: {oops\n\n").error_type == "bad_response");
  CHECK(parseReply(Provider::kOpenAi, 200, "data: " + std::string(100'000, '[') + "\n\n")
            .error_type == "bad_response");
}

TEST_CASE("reasoning models: max_completion_tokens and no temperature") {
  CHECK(isReasoningModel("o1"));
  CHECK(isReasoningModel("o3-mini"));
  CHECK(isReasoningModel("O4-mini-2025-04-16"));
  CHECK(isReasoningModel("gpt-5-mini"));
  CHECK(isReasoningModel("openai/gpt-5"));
  CHECK_FALSE(isReasoningModel("gpt-4o-mini"));
  CHECK_FALSE(isReasoningModel("gpt-oss-20b"));
  CHECK_FALSE(isReasoningModel("claude-3-5-haiku-latest"));
  CHECK_FALSE(isReasoningModel("olmo-2"));
  const auto body = [](Provider p, const std::string& model) {
    rapidjson::Document d;
    d.Parse(buildRequest(p, "https://x/v1", "k", model, prompt(), 2000).body.c_str());
    return d;
  };
  const auto o3 = body(Provider::kOpenAi, "o3-mini");
  CHECK(o3["max_completion_tokens"].GetInt() == 2000);
  CHECK_FALSE(o3.HasMember("max_tokens"));
  CHECK_FALSE(o3.HasMember("temperature"));
  const auto gpt4 = body(Provider::kOpenAi, "gpt-4o");
  CHECK(gpt4["max_tokens"].GetInt() == 2000);
  CHECK(gpt4["temperature"].GetInt() == 0);
  CHECK_FALSE(gpt4.HasMember("max_completion_tokens"));
  // The Messages API has neither rule: its max_tokens and temperature stay.
  const auto claude = body(Provider::kAnthropic, "o3-lookalike");
  CHECK(claude["max_tokens"].GetInt() == 2000);
  CHECK(claude["temperature"].GetInt() == 0);
}

TEST_CASE("json_schema: OpenAI response_format strict, Anthropic a forced tool") {
  ReplyFormat f;
  f.kind = ReplyFormat::Kind::kJsonSchema;
  f.schema_name = "verdict";
  f.schema = replySchema(*builtinRubric("faithfulness"));
  rapidjson::Document o, a;
  o.Parse(buildRequest(Provider::kOpenAi, "https://x/v1", "k", "gpt-4o", prompt(), 300, f)
              .body.c_str());
  CHECK(std::string(o["response_format"]["type"].GetString()) == "json_schema");
  CHECK(std::string(o["response_format"]["json_schema"]["name"].GetString()) == "verdict");
  CHECK(o["response_format"]["json_schema"]["strict"].IsTrue());
  CHECK(o["response_format"]["json_schema"]["schema"]["additionalProperties"].IsFalse());
  a.Parse(buildRequest(Provider::kAnthropic, "https://x", "k", "claude-sonnet-4", prompt(), 300, f)
              .body.c_str());
  CHECK(std::string(a["tools"][0]["name"].GetString()) == "verdict");
  CHECK(a["tools"][0]["input_schema"]["required"].Size() == 3);
  CHECK(std::string(a["tool_choice"]["type"].GetString()) == "tool");
  CHECK(std::string(a["tool_choice"]["name"].GetString()) == "verdict");
  CHECK_FALSE(a.HasMember("response_format"));
}

TEST_CASE("Anthropic tool_use replies: the input is the content, whole or streamed") {
  const auto r = parseReply(
      Provider::kAnthropic, 200,
      R"({"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"verdict","input":{"justification":"Says \"5\".","unsupported_claim":null,"score":3}}],"stop_reason":"tool_use","usage":{"input_tokens":900,"output_tokens":30}})");
  REQUIRE(r.ok);
  CHECK(r.content == R"({"justification":"Says \"5\".","unsupported_claim":null,"score":3})");
  CHECK(r.finish == FinishReason::kStop);
  CHECK(parseVerdict(r.content, r.finish, 1, 4).score == 3);
  const std::string sse =
      "event: message_start\ndata: "
      R"({"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":900,"output_tokens":1}}})"
      "\n\nevent: content_block_start\ndata: "
      R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"verdict","input":{}}})"
      "\n\nevent: content_block_delta\ndata: "
      R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"justification\": \"ok\", "}})"
      "\n\nevent: content_block_delta\ndata: "
      R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"score\": 4}"}})"
      "\n\nevent: message_delta\ndata: "
      R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}})"
      "\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  const auto s = parseReply(Provider::kAnthropic, 200, sse);
  REQUIRE(s.ok);
  CHECK(s.content == R"({"justification": "ok", "score": 4})");
  CHECK(s.usage->completion_tokens == 12);
}

TEST_CASE("an endpoint's query stays after the path it is given") {
  // "/v1?api-key=xyz" + "/chat/completions" was "/v1?api-key=xyz/chat/completions": the path
  // was /v1 and the key "xyz/chat/completions" (a new-user trial).
  using assay::llm::endpointUrl;
  CHECK(endpointUrl("https://h/v1?api-key=xyz", "/chat/completions") ==
        "https://h/v1/chat/completions?api-key=xyz");
  CHECK(
      endpointUrl("https://h/openai/deployments/d/?api-version=2024-06-01", "/chat/completions") ==
      "https://h/openai/deployments/d/chat/completions?api-version=2024-06-01");
  CHECK(endpointUrl("https://api.openai.com/v1/", "/files") == "https://api.openai.com/v1/files");
  CHECK(endpointUrl("https://api.anthropic.com", "/messages") ==
        "https://api.anthropic.com/v1/messages");
  CHECK(endpointUrl("https://gw/v1?k=1", "/messages") == "https://gw/v1/messages?k=1");
}

TEST_CASE("RequestTemplate: the same request, byte for byte, as buildRequest") {
  // The judge builds the fixed parts once (llm_judge.cpp); every call's body must be what
  // buildRequest writes, since the verdict store's key is a hash of it.
  ReplyFormat schema_format;
  schema_format.kind = ReplyFormat::Kind::kJsonSchema;
  schema_format.schema_name = "verdict";
  schema_format.schema = replySchema(*builtinRubric("faithfulness"));
  ReplyFormat text;
  text.kind = ReplyFormat::Kind::kText;
  text.temperature = 0.7;
  const std::string system = "Judge \"faithfulness\" \\ ASSAY_USER_MESSAGE_5f2c9e \u00e9\t\n";
  for (const Provider p : {Provider::kOpenAi, Provider::kAnthropic})
    for (const auto& model : {std::string("gpt-4o-mini"), std::string("o3-mini")})
      for (const ReplyFormat& f : {ReplyFormat{}, schema_format, text}) {
        const RequestTemplate t(p, "https://h.example/v1?api-key=k", "sk-1", model, system, 300, f);
        for (const std::string& user :
             {std::string(""), std::string("plain"), std::string("\"ASSAY_USER_MESSAGE_5f2c9e\""),
              std::string("quote \" backslash \\ control \x01 tab \t \u2028 \xF0\x9F\x98\x80"),
              std::string(100000, 'x')}) {
          Prompt prompt;
          prompt.system = system;
          prompt.user = user;
          const auto expected =
              buildRequest(p, "https://h.example/v1?api-key=k", "sk-1", model, prompt, 300, f);
          const auto got = t.request(user);
          CHECK(got.body == expected.body);
          CHECK(got.url == expected.url);
          CHECK(got.headers == expected.headers);
          CHECK(got.method == expected.method);
        }
      }
}
