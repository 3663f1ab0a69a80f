#include "judges/llm/pricing.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <string>

using namespace assay::llm;

namespace {

// Money compared to a relative 1e-12: exact to far below a micro-cent at these magnitudes.
doctest::Approx money(double v) { return doctest::Approx(v).epsilon(1e-12); }

TokenUsage usage(std::int64_t prompt, std::int64_t completion, std::int64_t cached = 0) {
  TokenUsage u;
  u.prompt_tokens = prompt;
  u.cached_prompt_tokens = cached;
  u.completion_tokens = completion;
  return u;
}

ModelPrice price(const char* model) {
  const auto p = PriceTable::builtin().find(model);
  REQUIRE(p.has_value());
  return *p;
}

rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

}  // namespace

// ---- Issue 3, "Cases that must come out right" ------------------------------------------------

TEST_CASE("800 input + 200 output tokens: gpt-4o-mini $0.000240, gpt-4o $0.00400 a call") {
  const ModelPrice mini = price("gpt-4o-mini");
  CHECK(mini.input_usd_per_mtok == 0.15);
  CHECK(mini.output_usd_per_mtok == 0.60);
  CHECK(costUsd(mini, usage(800, 200)) == money(0.000240));
  const ModelPrice gpt4o = price("gpt-4o");
  CHECK(gpt4o.input_usd_per_mtok == 2.50);
  CHECK(gpt4o.output_usd_per_mtok == 10.00);
  CHECK(costUsd(gpt4o, usage(800, 200)) == money(0.00400));
}

TEST_CASE("1,500 gpt-4o-mini calls = $0.36 = EUR 0.3312 at 0.92") {
  const double usd = 1500 * costUsd(price("gpt-4o-mini"), usage(800, 200));
  CHECK(usd == money(0.36));
  CHECK(costEur(usd, 0.92) == money(0.3312));
}

TEST_CASE("2,000 gpt-4o calls a day = $8.00/day; 30 days = $240.00 = EUR 220.80") {
  const double per_day = 2000 * costUsd(price("gpt-4o"), usage(800, 200));
  CHECK(per_day == money(8.00));
  CHECK(costEur(per_day, 0.92) == money(7.36));
  CHECK(30 * per_day == money(240.00));
  CHECK(costEur(30 * per_day, 0.92) == money(220.80));
}

TEST_CASE("cached prompt tokens are a subset of the prompt, priced at the cached rate") {
  // prompt 2,400 of which 2,000 cached, completion 100, $2.50 / cached $1.25 / $10.00.
  const ModelPrice p{2.50, 1.25, 10.00};
  CHECK(costUsd(p, usage(2400, 100, 2000)) == money(0.0045));
  // Not $0.0095: the cached tokens are not charged on top of the full prompt.
  CHECK(costUsd(p, usage(2400, 100, 2000)) != money(0.0095));
}

TEST_CASE("null prompt_tokens_details and completion_tokens_details mean zero, no error") {
  const auto d = json(R"({
    "id": "chatcmpl-AXq1", "object": "chat.completion", "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "{\"score\": 4}"}}],
    "usage": {"prompt_tokens": 950, "completion_tokens": 40, "total_tokens": 990,
              "prompt_tokens_details": null, "completion_tokens_details": null}})");
  const auto u = parseOpenAiUsage(d);
  REQUIRE(u.has_value());
  CHECK(u->prompt_tokens == 950);
  CHECK(u->cached_prompt_tokens == 0);
  CHECK(u->completion_tokens == 40);
  CHECK(u->reported);
  CHECK(costUsd(price("gpt-4o-mini"), *u) == money((950 * 0.15 + 40 * 0.60) / 1e6));
}

// ---- Provider response bodies -------------------------------------------------------------------

TEST_CASE("an OpenAI chat-completions body with cached and reasoning tokens") {
  // Shape of a 2025 chat.completion from api.openai.com (o3-mini: reasoning tokens are part
  // of completion_tokens and must not be counted twice).
  const auto d = json(R"({
    "id": "chatcmpl-BQ3yVlcPkMu2hLzTvRq4eJH7xWnZs",
    "object": "chat.completion",
    "created": 1745923415,
    "model": "o3-mini-2025-01-31",
    "choices": [{
      "index": 0,
      "message": {"role": "assistant",
                  "content": "{\"score\": 3, \"justification\": \"Two of three claims are supported.\", \"unsupported_claim\": \"founded in 1987\"}",
                  "refusal": null, "annotations": []},
      "logprobs": null,
      "finish_reason": "stop"}],
    "usage": {
      "prompt_tokens": 2400,
      "completion_tokens": 612,
      "total_tokens": 3012,
      "prompt_tokens_details": {"cached_tokens": 2048, "audio_tokens": 0},
      "completion_tokens_details": {"reasoning_tokens": 512, "audio_tokens": 0,
                                    "accepted_prediction_tokens": 0,
                                    "rejected_prediction_tokens": 0}},
    "service_tier": "default",
    "system_fingerprint": "fp_42bfad963b"})");
  const auto u = parseOpenAiUsage(d);
  REQUIRE(u.has_value());
  CHECK(u->prompt_tokens == 2400);
  CHECK(u->cached_prompt_tokens == 2048);
  CHECK(u->completion_tokens == 612);
  CHECK(u->cache_write_prompt_tokens == 0);
  // o3-mini: $1.10 / cached $0.55 / $4.40.
  CHECK(costUsd(price("o3-mini-2025-01-31"), *u) ==
        money((352 * 1.10 + 2048 * 0.55 + 612 * 4.40) / 1e6));
}

TEST_CASE("an OpenAI-compatible body without details objects (vLLM, Ollama)") {
  const auto d = json(R"({
    "id": "chatcmpl-7c1e0b", "object": "chat.completion", "created": 1745923000,
    "model": "mistral-small-latest",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 812, "total_tokens": 1010, "completion_tokens": 198}})");
  const auto u = parseOpenAiUsage(d);
  REQUIRE(u.has_value());
  CHECK(u->prompt_tokens == 812);
  CHECK(u->cached_prompt_tokens == 0);
  CHECK(u->completion_tokens == 198);
  // Mistral has no cached rate: cached = input.
  const ModelPrice p = price("mistral-small-latest");
  CHECK(p.cached_input_usd_per_mtok == p.input_usd_per_mtok);
}

TEST_CASE("an Anthropic Messages body: input_tokens excludes cache reads and writes") {
  const auto d = json(R"({
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-haiku-20241022",
    "content": [{"type": "text",
                 "text": "{\"score\": 4, \"justification\": \"Every claim is in context 2.\", \"unsupported_claim\": null}"}],
    "stop_reason": "end_turn",
    "stop_sequence": null,
    "usage": {"input_tokens": 400, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 2000,
              "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
              "output_tokens": 100, "service_tier": "standard"}})");
  const auto u = parseAnthropicUsage(d);
  REQUIRE(u.has_value());
  CHECK(u->prompt_tokens == 2400);
  CHECK(u->cached_prompt_tokens == 2000);
  CHECK(u->cache_write_prompt_tokens == 0);
  CHECK(u->completion_tokens == 100);
  // claude-3-5-haiku: $0.80 / cache hits $0.08 / $4.00.
  CHECK(costUsd(price("claude-3-5-haiku-20241022"), *u) ==
        money((400 * 0.80 + 2000 * 0.08 + 100 * 4.00) / 1e6));
}

TEST_CASE("Anthropic cache writes are part of the prompt and charged at the cache-write price") {
  const auto d = json(R"({"id": "msg_013Zva2CMHLNnXjNJJKqJ2EF", "type": "message",
    "role": "assistant", "model": "claude-sonnet-4-20250514",
    "content": [{"type": "text", "text": "{\"score\": 2}"}], "stop_reason": "end_turn",
    "usage": {"input_tokens": 50, "cache_creation_input_tokens": 1000,
              "cache_read_input_tokens": null, "output_tokens": 20}})");
  const auto u = parseAnthropicUsage(d);
  REQUIRE(u.has_value());
  CHECK(u->prompt_tokens == 1050);
  CHECK(u->cached_prompt_tokens == 0);
  CHECK(u->cache_write_prompt_tokens == 1000);
  // claude-sonnet-4: $3.00 input, $3.75 5-minute cache write (1.25x), $15.00 output.
  CHECK(costUsd(price("claude-sonnet-4"), *u) ==
        money((50 * 3.00 + 1000 * 3.75 + 20 * 15.00) / 1e6));
  // Minimal body: the cache fields are optional.
  const auto minimal =
      parseAnthropicUsage(json(R"({"usage": {"input_tokens": 12, "output_tokens": 3}})"));
  REQUIRE(minimal.has_value());
  CHECK(minimal->prompt_tokens == 12);
  CHECK(minimal->completion_tokens == 3);
}

// Issue 9's golden: 20 input, 8,000 cache-write, 400 output tokens at $3.00 / $3.75 (write) /
// $0.30 (read) / $15.00 per million cost $0.03606 in both reply shapes (before: the native
// shape was charged $0.05406, writes at a fixed 2x, and the gateway shape $0.03006, writes
// at the input rate).
TEST_CASE("cache writes cost the same in Anthropic's shape and in a gateway's OpenAI shape") {
  const ModelPrice p{3.00, 0.30, 15.00, 3.75};
  const auto native = parseAnthropicUsage(json(R"({"type": "message", "usage": {
      "input_tokens": 20, "cache_creation_input_tokens": 8000, "cache_read_input_tokens": 0,
      "output_tokens": 400}})"));
  // LiteLLM in front of Anthropic: prompt_tokens includes the cache writes and reads.
  const auto gateway = parseOpenAiUsage(json(R"({"object": "chat.completion", "usage": {
      "prompt_tokens": 8020, "completion_tokens": 400, "total_tokens": 8420,
      "prompt_tokens_details": {"cached_tokens": 0}, "cache_creation_input_tokens": 8000,
      "cache_read_input_tokens": 0}})"));
  REQUIRE(native.has_value());
  REQUIRE(gateway.has_value());
  for (const TokenUsage& u : {*native, *gateway}) {
    CHECK(u.prompt_tokens == 8020);
    CHECK(u.cache_write_prompt_tokens == 8000);
    CHECK(costUsd(p, u) == money(0.03606));
    const auto c = u.classes();
    CHECK(c.input == 20);
    CHECK(c.cache_write == 8000);
    CHECK(c.cached_input == 0);
    CHECK(c.output == 400);
    CHECK(c.reasoning == 0);
  }
}

TEST_CASE("every token class has a price: input, cached read, cache write, output, reasoning") {
  const ModelPrice p{2.00, 0.50, 8.00, 2.50};
  // o3-style reply: 3,000 prompt tokens of which 1,000 cached and 500 written by a gateway;
  // 900 completion tokens of which 600 reasoning (priced as output, counted once).
  const auto u = parseOpenAiUsage(json(R"({"usage": {"prompt_tokens": 3000,
      "completion_tokens": 900, "prompt_tokens_details": {"cached_tokens": 1000},
      "completion_tokens_details": {"reasoning_tokens": 600},
      "cache_creation_input_tokens": 500}})"));
  REQUIRE(u.has_value());
  const auto c = u->classes();
  CHECK(c.input == 1500);
  CHECK(c.cached_input == 1000);
  CHECK(c.cache_write == 500);
  CHECK(c.output == 300);
  CHECK(c.reasoning == 600);
  CHECK(c.input + c.cached_input + c.cache_write + c.output + c.reasoning == 3900);
  CHECK(costUsd(p, *u) == money((1500 * 2.00 + 1000 * 0.50 + 500 * 2.50 + 900 * 8.00) / 1e6));
  // Inconsistent classes make the usage unreadable (the caller charges an estimate).
  CHECK_FALSE(parseOpenAiUsage(json(R"({"usage": {"prompt_tokens": 100, "completion_tokens": 9,
      "prompt_tokens_details": {"cached_tokens": 60}, "cache_creation_input_tokens": 50}})")));
  CHECK_FALSE(parseOpenAiUsage(json(R"({"usage": {"prompt_tokens": 100, "completion_tokens": 9,
      "completion_tokens_details": {"reasoning_tokens": 10}}})")));
  CHECK_FALSE(parseOpenAiUsage(json(R"({"usage": {"prompt_tokens": 100, "completion_tokens": 9,
      "completion_tokens_details": "many"}})")));
  // The built-in table prices writes: OpenAI at the input rate, Anthropic at 1.25x input.
  CHECK(price("gpt-4o-mini").cache_write_usd_per_mtok == 0.15);
  CHECK(price("claude-sonnet-4-5").cache_write_usd_per_mtok == 3.75);
  CHECK(price("claude-3-5-haiku-20241022").cache_write_usd_per_mtok == 1.00);
  CHECK(price("mistral-large-2411").cache_write_usd_per_mtok == 2.00);
}

TEST_CASE("missing or malformed usage is nullopt: the caller charges an estimate") {
  for (const char* body : {
           R"({"id": "chatcmpl-1", "choices": []})",
           R"({"usage": null})",
           R"({"usage": "950/40"})",
           R"({"usage": {"prompt_tokens": 950}})",
           R"({"usage": {"prompt_tokens": "950", "completion_tokens": 40}})",
           R"({"usage": {"prompt_tokens": 950.5, "completion_tokens": 40}})",
           R"({"usage": {"prompt_tokens": -1, "completion_tokens": 40}})",
           R"({"usage": {"prompt_tokens": 950, "completion_tokens": null}})",
           R"({"usage": {"prompt_tokens": 950, "completion_tokens": 40,
                         "prompt_tokens_details": "none"}})",
           R"({"usage": {"prompt_tokens": 950, "completion_tokens": 40,
                         "prompt_tokens_details": {"cached_tokens": 951}}})",
           R"({"usage": {"prompt_tokens": 950, "completion_tokens": 40,
                         "prompt_tokens_details": {"cached_tokens": "12"}}})",
           R"([1, 2])",
       }) {
    CAPTURE(body);
    CHECK_FALSE(parseOpenAiUsage(json(body)).has_value());
  }
  for (
      const char* body : {
          R"({"type": "message", "content": []})",
          R"({"usage": {"input_tokens": 12}})",
          R"({"usage": {"input_tokens": 12, "output_tokens": 3.5}})",
          R"({"usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": -4}})",
          R"({"usage": {"input_tokens": 12, "output_tokens": 3, "cache_creation_input_tokens": "0"}})",
          // An OpenAI body is not an Anthropic one.
          R"({"usage": {"prompt_tokens": 950, "completion_tokens": 40}})",
      }) {
    CAPTURE(body);
    CHECK_FALSE(parseAnthropicUsage(json(body)).has_value());
  }
}

TEST_CASE("estimateUsage: prompt estimate in, max_tokens out, marked unreported") {
  const TokenUsage u = estimateUsage(1200, 300);
  CHECK(u.prompt_tokens == 1200);
  CHECK(u.cached_prompt_tokens == 0);
  CHECK(u.completion_tokens == 300);
  CHECK_FALSE(u.reported);
  CHECK(costUsd(price("gpt-4o"), u) == money((1200 * 2.50 + 300 * 10.00) / 1e6));
  CHECK(estimateUsage(-5, -1).prompt_tokens == 0);
  CHECK(estimateUsage(-5, -1).completion_tokens == 0);
}

TEST_CASE("estimateTokens = ceil(UTF-8 bytes / 3), above the real count for English") {
  CHECK(estimateTokens("") == 0);
  CHECK(estimateTokens("a") == 1);
  CHECK(estimateTokens("abc") == 1);
  CHECK(estimateTokens("abcd") == 2);
  CHECK(estimateTokens("\xC3\xA9t\xC3\xA9") == 2);  // "été": 5 bytes
  // 44 bytes; cl100k and o200k both make 10 tokens of it.
  const std::string fox = "The quick brown fox jumps over the lazy dog.";
  CHECK(estimateTokens(fox) == 15);
  CHECK(estimateTokens(fox) >= 10);
}

TEST_CASE("costUsd never goes negative on an inconsistent usage") {
  const ModelPrice p{2.50, 1.25, 10.00};
  TokenUsage u = usage(100, 10, 500);  // cached > prompt: clamped to the prompt
  CHECK(costUsd(p, u) == money((100 * 1.25 + 10 * 10.00) / 1e6));
  u = usage(-100, -10);
  CHECK(costUsd(p, u) == 0.0);
}

// ---- Price table --------------------------------------------------------------------------------

TEST_CASE("a dated snapshot is priced as its base model") {
  const PriceTable t = PriceTable::builtin();
  const auto mini = t.match("gpt-4o-mini-2024-07-18");
  REQUIRE(mini.has_value());
  CHECK(mini->name == "gpt-4o-mini");
  CHECK(mini->price.input_usd_per_mtok == 0.15);
  CHECK(t.match("gpt-4o-2024-08-06")->name == "gpt-4o");
  CHECK(t.match("gpt-4.1-mini-2025-04-14")->name == "gpt-4.1-mini");
  CHECK(t.match("claude-3-5-haiku-20241022")->name == "claude-3-5-haiku");
  CHECK(t.match("claude-3-5-haiku@20241022")->name == "claude-3-5-haiku");  // Vertex AI form
  CHECK(t.match("claude-3-5-haiku-latest")->name == "claude-3-5-haiku");
  CHECK(t.match("claude-3-7-sonnet-20250219")->name == "claude-3-7-sonnet");
  CHECK(t.match("claude-sonnet-4-20250514")->name == "claude-sonnet-4");
  CHECK(t.match("claude-3-opus-20240229")->price.output_usd_per_mtok == 75.00);
  CHECK(t.match("mistral-large-2411")->name == "mistral-large");
  CHECK(t.match("mistral-small-latest")->name == "mistral-small");
  // An exact entry beats its base name: the first gpt-4o snapshot had its own price.
  CHECK(t.find("gpt-4o-2024-05-13")->input_usd_per_mtok == 5.00);
}

TEST_CASE("prefix collisions: the longest base wins, another model is never priced by prefix") {
  const PriceTable t = PriceTable::builtin();
  // gpt-4o is a prefix of gpt-4o-mini's snapshot, but the snapshot is gpt-4o-mini.
  CHECK(t.find("gpt-4o-mini-2024-07-18")->input_usd_per_mtok == 0.15);
  CHECK(t.find("gpt-4.1-nano-2025-04-14")->input_usd_per_mtok == 0.10);
  CHECK(t.find("o3-mini-2025-01-31")->input_usd_per_mtok == 1.10);
  // "gpt-4o-mini-x" must not match gpt-4o (nor, being another name, gpt-4o-mini).
  CHECK_FALSE(t.find("gpt-4o-mini-x").has_value());
  CHECK_FALSE(t.find("gpt-4o-realtime-preview").has_value());
  CHECK_FALSE(t.find("o3-pro").has_value());
  CHECK_FALSE(t.find("claude-opus-4-7").has_value());  // not claude-opus-4
  CHECK_FALSE(t.find("gpt-4o-").has_value());
  CHECK_FALSE(t.find("gpt-4o-123").has_value());  // fewer than four digits: not a snapshot
}

TEST_CASE("an unknown model has no price") {
  const PriceTable t = PriceTable::builtin();
  CHECK_FALSE(t.find("llama3.1:8b").has_value());
  CHECK_FALSE(t.find("").has_value());
  CHECK_FALSE(t.find("GPT-4O").has_value());  // names are case-sensitive
  CHECK_FALSE(t.find("my-azure-deployment").has_value());
}

TEST_CASE("set() adds a model and overrides a built-in price") {
  PriceTable t = PriceTable::builtin();
  t.set("llama3.1:8b", uncachedPrice(0.0, 0.0));
  REQUIRE(t.find("llama3.1:8b").has_value());
  CHECK(t.find("llama3.1:8b")->cached_input_usd_per_mtok == 0.0);
  t.set("gpt-4o", {2.00, 1.00, 8.00});
  CHECK(t.find("gpt-4o")->input_usd_per_mtok == 2.00);
  CHECK(t.find("gpt-4o-2024-11-20")->output_usd_per_mtok == 8.00);  // snapshots follow
  CHECK(costUsd(*t.find("gpt-4o"), usage(800, 200)) == money(0.0032));
  // The built-in table itself is untouched.
  CHECK(PriceTable::builtin().find("gpt-4o")->input_usd_per_mtok == 2.50);
}

TEST_CASE("every built-in price is positive and cached never exceeds input") {
  const PriceTable t = PriceTable::builtin();
  for (const char* required :
       {"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3-mini",
        "claude-3-5-haiku", "claude-3-5-sonnet", "claude-3-7-sonnet", "claude-sonnet-4",
        "claude-3-opus", "mistral-small", "mistral-large"}) {
    CAPTURE(required);
    CHECK(t.find(required).has_value());
  }
  for (const auto& entry : t.entries()) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE is a lambda
    const ModelPrice& p = entry.second;
    CAPTURE(name);
    CHECK(p.input_usd_per_mtok > 0);
    CHECK(p.output_usd_per_mtok >= p.input_usd_per_mtok);
    CHECK(p.cached_input_usd_per_mtok > 0);
    CHECK(p.cached_input_usd_per_mtok <= p.input_usd_per_mtok);
  }
}
