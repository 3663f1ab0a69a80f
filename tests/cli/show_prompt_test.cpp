#include "cli/show_prompt.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {
using test::runCli;

std::string tmp(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/assay_prompt_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

const std::string kConfig = R"(kafka: {brokers: embedded, topic: t, group_id: g}
redact: {detectors: [email]}
judges:
  - {name: overlap, kind: lexical, metric: context_overlap}
  - {name: faith_llm, kind: llm, criterion: faithfulness, model: gpt-4o-mini}
  - name: tone_llm
    kind: llm
    criterion: tone
    model: gpt-4o-mini
    max_tokens: 200
    rubric:
      definition: Judge whether the answer's tone fits the customer's tier.
      inputs: [question, answer, /metadata/tier]
      levels:
        1: {name: off, description: Wrong register for the tier.}
        2: {name: fitting, description: The register the tier expects.}
)";

}  // namespace

TEST_CASE("assay prompt: a custom criterion's request, as built by the judge, sent nowhere") {
  const std::string config = tmp("c.yaml", kConfig);
  const std::string events = tmp(
      "e.jsonl",
      "not json\n"
      R"({"id":"r1","question":"Where is my order?","answer":"Mail bob@example.com, dear.","metadata":{"tier":"gold"}})"
      "\n"
      R"({"id":"r2","question":"q2","answer":"a2","metadata":{"tier":{"level":3}}})"
      "\n"
      R"({"id":"r3","question":"q3","answer":"a3"})"
      "\n");
  const auto r = runCli({"prompt", "--config", config, "--judge", "tone_llm", "--events", events});
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("## tone_llm (criterion tone, your own, scale 1-2, openai gpt-4o-mini)") !=
        std::string::npos);
  CHECK(r.out.find("POST https://api.openai.com/v1/chat/completions") != std::string::npos);
  CHECK(r.out.find("at most 200 out (max_tokens)") != std::string::npos);
  CHECK(r.out.find("Task: Judge whether the answer's tone fits the customer's tier.") !=
        std::string::npos);
  CHECK(r.out.find("1 (off): Wrong register for the tier.\n2 (fitting):") != std::string::npos);
  // The first event that parses; its pointer input, its e-mail redacted as assayd redacts it.
  CHECK(
      r.out.find(
          R"({"question":"Where is my order?","/metadata/tier":"gold","answer":"Mail [EMAIL_1], dear."})") !=
      std::string::npos);
  CHECK(r.out.find("bob@example.com") == std::string::npos);
  CHECK(r.out.find(R"("enum":[1,2])") != std::string::npos);
  CHECK(r.out.find("faith_llm") == std::string::npos);  // only the judge asked for
  // --id chooses the event; a non-string value reaches the judge as JSON text.
  const auto r2 = runCli(
      {"prompt", "--config", config, "--judge", "tone_llm", "--events", events, "--id", "r2"});
  REQUIRE(r2.code == 0);
  CHECK(r2.out.find(R"("/metadata/tier":"{\"level\":3}")") != std::string::npos);
  // An event the judge would end before any call: no request, the outcome instead.
  const auto r3 = runCli({"prompt", "--config", config, "--events", events, "--id", "r3"});
  REQUIRE(r3.code == 0);
  CHECK(r3.out.find("no call for this event: the event has no value at /metadata/tier "
                    "(rubric.inputs) (outcome not_applicable)") != std::string::npos);
  CHECK(r3.out.find("no call for this event: the event has no contexts to judge against "
                    "(outcome no_context)") != std::string::npos);  // faith_llm
  CHECK(r3.out.find("### system message") == std::string::npos);
  // --body: the exact bodies, one JSON document per judge.
  const auto b = runCli({"prompt", "--config", config, "--body"});
  REQUIRE(b.code == 0);
  std::istringstream lines(b.out);
  std::vector<std::string> criteria;
  for (std::string line; std::getline(lines, line);) {
    rapidjson::Document d;
    d.Parse(line.c_str());
    REQUIRE_FALSE(d.HasParseError());
    CHECK(d["temperature"].GetInt() == 0);
    const std::string system = d["messages"][0]["content"].GetString();
    criteria.push_back(system.substr(system.find("criterion: ") + 11, 4));
  }
  CHECK(criteria == std::vector<std::string>{"fait", "tone"});
  // Without --events: a sample event with a placeholder in each input.
  const auto s = runCli({"prompt", "--config", config, "--judge", "tone_llm"});
  REQUIRE(s.code == 0);
  CHECK(s.out.find(R"("/metadata/tier":"<the event's value at /metadata/tier>")") !=
        std::string::npos);
  std::filesystem::remove(config);
  std::filesystem::remove(events);
}

TEST_CASE("assay prompt: what it refuses, and why") {
  const std::string config = tmp("c2.yaml", kConfig);
  const std::string junk = tmp("junk.jsonl", "not json\n{\"question\": 1}\n");
  auto refused = [](const std::vector<std::string>& args, const std::string& why) {
    const auto r = runCli(args);
    CAPTURE(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(why) != std::string::npos);
  };
  refused({"prompt"}, "--config ASSAYD.yaml is required");
  refused({"prompt", "--config", config, "--judge", "overlap"},
          "no LLM judge named 'overlap' in " + config + " (its LLM judges: faith_llm, tone_llm)");
  refused({"prompt", "--config", config, "--events", junk},
          junk + ": no line is an event; the first: " + junk + ":1: not_json");
  refused({"prompt", "--config", config, "--events", junk + ".missing"}, "cannot be opened");
  refused({"prompt", "--config", config, "--id", "x"}, "--id needs --events FILE");
  const std::string bad = tmp("bad.yaml",
                              "judges:\n  - {name: t, kind: llm, criterion: tone, "
                              "model: gpt-4o-mini}\n");
  refused({"prompt", "--config", bad},
          bad + ":2:37: judges[0].criterion: 'tone' is not a built-in");
  for (const auto& p : {config, junk, bad}) std::filesystem::remove(p);
}
