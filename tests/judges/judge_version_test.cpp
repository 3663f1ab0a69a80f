// A configured judge's version (judges/judge.hpp, judgeVersion): what can change its scores is
// in it, what only changes how calls are made is not.
#include <doctest/doctest.h>

#include <string>

#include "judges/bleu.hpp"
#include "judges/judge.hpp"
#include "judges/llm/llm_judge.hpp"

using namespace assay;

namespace {

JudgeOptionValues llmOptions() {
  JudgeOptionValues v;
  v.set("criterion", std::string("faithfulness"));
  v.set("provider", std::string("openai"));
  v.set("endpoint", std::string("https://api.openai.com/v1"));
  v.set("model", std::string("gpt-4o-mini"));
  v.set("api_key_env", std::string("OPENAI_API_KEY"));
  v.set("timeout_ms", std::int64_t{30000});
  return v;
}

std::string llmVersion(const JudgeOptionValues& v) {
  return judgeVersion(llm::LlmJudge::kDescriptor, v);
}

}  // namespace

TEST_CASE("judge version: 12 hex digits, stable for the same options, pinned") {
  const auto v = llmVersion(llmOptions());
  CHECK(v.size() == 12);
  CHECK(v.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(llmVersion(llmOptions()) == v);
  // The canonical text and the hash are part of every judgment written: a change of either
  // would start new versions for every judge, so they are pinned.
  // (provider: openai is the default, so it is not a field: as if it were not written)
  CHECK(v == "bfea25f0efb3");
  JudgeOptionValues bleu;
  bleu.set("max_order", std::int64_t{2});
  CHECK(judgeVersion(BleuJudge::kDescriptor, bleu) == "9aaf37952189");
  CHECK(judgeVersion(BleuJudge::kDescriptor, JudgeOptionValues{}) == "3b49556b0793");
}

TEST_CASE("judge version: what only changes how calls are made keeps the version") {
  const auto base = llmVersion(llmOptions());
  for (const auto& option : std::vector<std::pair<std::string, OptionValue>>{
           {"timeout_ms", std::int64_t{5000}},
           {"api_key_env", std::string("OTHER_KEY")},
           {"max_in_flight", std::int64_t{64}},
           {"daily_limit_eur", 3.5},
           {"max_retries", std::int64_t{0}},
           {"batch", true},
           {"requests_per_minute", 60.0},
           // the same host, another path: the same model behind it
           {"endpoint", std::string("https://API.openai.com/v1/")}}) {
    const std::string& name = option.first;  // not a structured binding: CAPTURE is a lambda
    CAPTURE(name);
    auto v = llmOptions();
    v.set(name, option.second);
    CHECK(llmVersion(v) == base);
  }
}

TEST_CASE("judge version: what can change the scores starts a new version") {
  const auto base = llmVersion(llmOptions());
  OptionTree rubric;
  rubric.kind = OptionTree::Kind::kMap;
  rubric.map.push_back(
      {"definition", OptionTree{OptionTree::Kind::kScalar, "Is it faithful?", {}, {}}});
  for (const auto& option : std::vector<std::pair<std::string, OptionValue>>{
           {"model", std::string("gpt-4o")},
           {"criterion", std::string("answer_relevancy")},
           {"provider", std::string("anthropic")},
           {"endpoint", std::string("https://gateway.example.com/v1")},
           {"max_tokens", std::int64_t{100}},
           {"max_input_tokens", std::int64_t{2000}},
           {"reply_format", std::string("json_object")},
           {"score_trimmed", true},
           {"rubric", rubric}}) {
    const std::string& name = option.first;  // not a structured binding: CAPTURE is a lambda
    CAPTURE(name);
    auto v = llmOptions();
    v.set(name, option.second);
    CHECK(llmVersion(v) != base);
  }
  // A rubric edit of one character.
  auto a = llmOptions(), b = llmOptions();
  a.set("rubric", rubric);
  rubric.map[0].value.scalar = "Is it faithful? ";
  b.set("rubric", rubric);
  CHECK(llmVersion(a) != llmVersion(b));
}

TEST_CASE("judge version: every option of every judge type says whether it scores") {
  // The LLM judge's operational options are the only ones left out; a local judge's options
  // all change its scores.
  int llm_left_out = 0;
  for (const auto& o : llm::LlmJudge::kDescriptor.options) llm_left_out += o.scoring ? 0 : 1;
  CHECK(llm_left_out == 17);
  for (const auto& o : BleuJudge::kDescriptor.options) CHECK(o.scoring);
  CHECK(llm::LlmJudge::kDescriptor.version_salt == "prompt-template-1");
}

TEST_CASE("judge version: its fields name what changed, and their digests show it") {
  auto a = llmOptions(), b = llmOptions();
  b.set("model", std::string("gpt-4o"));
  b.set("max_tokens", std::int64_t{100});
  b.set("timeout_ms", std::int64_t{1000});  // not a scoring option: not a field
  const auto va = judgeVersionOf(llm::LlmJudge::kDescriptor, a);
  const auto vb = judgeVersionOf(llm::LlmJudge::kDescriptor, b);
  REQUIRE(va.fields.size() >= 4);
  CHECK(va.fields[0] == std::pair<std::string, std::string>{"type", "llm"});
  CHECK(va.fields[1].first == "kind");
  CHECK(va.fields[2] == std::pair<std::string, std::string>{"template", "prompt-template-1"});
  CHECK(va.digests.size() == va.fields.size());
  for (const auto& field : va.digests) {  // not a structured binding: CAPTURE is a lambda
    CAPTURE(field.first);
    CHECK(field.second.size() == 4);
  }
  CHECK(changedFields(va.fields, vb.fields) == std::vector<std::string>{"model", "max_tokens"});
  CHECK(changedFields(va.digests, vb.digests) == std::vector<std::string>{"model", "max_tokens"});
  CHECK(changedFields(vb.fields, va.fields) == std::vector<std::string>{"model", "max_tokens"});
  CHECK(changedFields(va.fields, va.fields).empty());
  // The version is the hash of the fields: the same fields, the same version, whoever made them.
  CHECK(JudgeVersion::make(va.fields).id == va.id);
  CHECK(judgeVersion(llm::LlmJudge::kDescriptor, a) == va.id);
}
