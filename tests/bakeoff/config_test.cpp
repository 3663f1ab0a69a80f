#include "cli/bakeoff/config.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli/bakeoff/run.hpp"

using namespace assay::bakeoff;
namespace fs = std::filesystem;

namespace {

/// A directory with inputs.jsonl (ids q1..qN) and one recorded file per arm.
struct Dir {
  fs::path path;
  explicit Dir(int inputs = 2, int arms = 3) {
    path = fs::temp_directory_path() / ("assay_bakeoff_" + std::to_string(::getpid()));
    fs::create_directories(path);
    std::ofstream in(path / "inputs.jsonl");
    for (int i = 1; i <= inputs; ++i)
      in << R"({"id": "q)" << i << R"(", "question": "What is )" << i
         << R"(?", "contexts": [{"id": "1", "text": "ctx )" << i << R"("}]})"
         << "\n";
    for (int a = 0; a < arms; ++a) {
      std::ofstream out(path / ("arm" + std::to_string(a) + ".jsonl"));
      for (int i = 1; i <= inputs; ++i)
        out << R"({"id": "q)" << i << R"(", "output": "arm )" << a << " answer " << i << "\"}\n";
    }
  }
  ~Dir() { fs::remove_all(path); }
};

std::string armsYaml(int arms) {
  std::string s = "arms:\n";
  for (int a = 0; a < arms; ++a)
    s += "  - {name: a" + std::to_string(a) + ", recorded: arm" + std::to_string(a) + ".jsonl}\n";
  return s;
}

const std::string kJudges =
    "judges:\n"
    "  - {name: j1, provider: openai, endpoint: 'http://127.0.0.1:1/v1', model: gpt-4o-mini}\n"
    "  - {name: j2, provider: anthropic, endpoint: 'http://127.0.0.1:1', model: "
    "claude-3-5-haiku-latest}\n";

BakeoffLoad load(const Dir& d, const std::string& yaml) {
  return loadBakeoffString(yaml, "b.yaml", d.path.string());
}

std::string errors(const BakeoffLoad& l) {
  std::string s;
  for (const auto& e : l.errors) s += e.format() + "\n";
  return s;
}

}  // namespace

TEST_CASE("a valid bakeoff file: inputs, recorded arms, default criteria, judges") {
  Dir d;
  const auto l =
      load(d, "seed: 3\npasses: 2\ninputs: {file: inputs.jsonl}\n" + armsYaml(3) + kJudges);
  INFO(errors(l));
  REQUIRE(l.ok());
  CHECK(l.config.inputs.size() == 2);
  CHECK(l.config.inputs[1].question == "What is 2?");
  REQUIRE(l.config.inputs[1].contexts.size() == 1);
  CHECK(l.config.criteria.size() == 5);  // the default preset
  CHECK(l.config.criteria[0].name == "relevance");
  CHECK(l.config.passes == 2);
  CHECK_FALSE(l.config.exclude_biased);  // the default
  CHECK(*l.config.seed == 3);
  const auto excl =
      load(d, "exclude_biased: true\ninputs: {file: inputs.jsonl}\n" + armsYaml(3) + kJudges);
  REQUIRE(excl.ok());
  CHECK(excl.config.exclude_biased);
  const auto bad =
      load(d, "exclude_biased: maybe\ninputs: {file: inputs.jsonl}\n" + armsYaml(3) + kJudges);
  CHECK(errors(bad).find("b.yaml:1:17: exclude_biased: expected true or false") !=
        std::string::npos);
  CHECK(l.config.judges[1].at.provider == assay::llm::Provider::kAnthropic);
  CHECK(readRecorded(l.config.arms[2], l.config.inputs) ==
        std::vector<std::string>{"arm 2 answer 1", "arm 2 answer 2"});
}

TEST_CASE("weights 30/25/20/15/5: the error names every criterion and the sum 95, with its line") {
  Dir d;
  const auto l = load(d,
                      "inputs: {file: inputs.jsonl}\n"
                      "criteria:\n"
                      "  - {name: relevance, weight: 30}\n"
                      "  - {name: completeness, weight: 25}\n"
                      "  - {name: clarity, weight: 20}\n"
                      "  - {name: accuracy, weight: 15}\n"
                      "  - {name: format, weight: 5}\n" +
                          armsYaml(3) + kJudges);
  REQUIRE(l.errors.size() == 1);
  CHECK(l.errors[0].format() ==
        "b.yaml:3:3: criteria: weights must sum to 100: relevance 30 + completeness 25 + clarity "
        "20 + accuracy 15 + format 5 = 95");
}

TEST_CASE("9 arms, or 5 arms × 10 inputs: the error names the cap") {
  {
    Dir d(2, 9);
    const auto l = load(d, "inputs: {file: inputs.jsonl}\n" + armsYaml(9) + kJudges);
    REQUIRE_FALSE(l.ok());
    CHECK(errors(l).find("9 arms: a bakeoff compares 2 to 8") != std::string::npos);
  }
  {
    Dir d(10, 5);
    const auto l = load(d, "inputs: {file: inputs.jsonl}\n" + armsYaml(5) + kJudges);
    REQUIRE_FALSE(l.ok());
    CHECK(errors(l).find("5 arms × 10 inputs = 50 cells: at most 40") != std::string::npos);
  }
}

TEST_CASE("bakeoff file errors: unknown keys, a missing output, a bad endpoint, placeholders") {
  Dir d;
  std::ofstream(d.path / "arm1.jsonl") << R"({"id": "q1", "output": "only one"})"
                                       << "\n";
  const auto l = load(d,
                      "inputs: {file: inputs.jsonl}\n"
                      "pases: 2\n"
                      "arms:\n"
                      "  - {name: a0, recorded: arm0.jsonl}\n"
                      "  - {name: a1, recorded: arm1.jsonl}\n"
                      "  - name: live\n"
                      "    provider: openai\n"
                      "    endpoint: api.openai.com\n"
                      "    model: gpt-4o-mini\n"
                      "    template: 'Q: {{question}} {{answer}}'\n" +
                          kJudges);
  const auto all = errors(l);
  INFO(all);
  CHECK(all.find("b.yaml:2:1: pases: unknown key (did you mean 'passes'?)") != std::string::npos);
  CHECK(all.find("arms[2].endpoint: 'api.openai.com': expected an http:// or https:// URL") !=
        std::string::npos);
  CHECK(all.find("unknown placeholder {{answer}}") != std::string::npos);
  // Recorded files are read once everything else is valid.
  const auto l2 = load(d, "inputs: {file: inputs.jsonl}\n" + armsYaml(3) + kJudges);
  REQUIRE(l2.errors.size() == 1);
  CHECK(l2.errors[0].format().find("arm1.jsonl: no output for input 'q2'") != std::string::npos);
  CHECK(l2.errors[0].line == 4);
}

TEST_CASE("a workflow inherits the arm's endpoint; a judge of an arm's family is a warning") {
  Dir d;
  const auto l = load(d,
                      "inputs: {file: inputs.jsonl}\n"
                      "arms:\n"
                      "  - {name: a0, recorded: arm0.jsonl}\n"
                      "  - name: flow\n"
                      "    provider: anthropic\n"
                      "    endpoint: 'http://127.0.0.1:1'\n"
                      "    model: claude-3-5-haiku-latest\n"
                      "    steps:\n"
                      "      - {template: 'Draft: {{question}}'}\n"
                      "      - {template: 'Improve: {{previous}}', provider: openai, endpoint: "
                      "'http://127.0.0.1:2/v1', model: gpt-4o}\n" +
                          kJudges);
  INFO(errors(l));
  REQUIRE(l.ok());
  const auto& flow = l.config.arms[1];
  REQUIRE(flow.steps.size() == 2);
  CHECK(flow.steps[0].at.model == "claude-3-5-haiku-latest");
  CHECK(flow.steps[1].at.model == "gpt-4o");
  CHECK(flow.steps[1].at.endpoint == "http://127.0.0.1:2/v1");
  // j1 (gpt-4o-mini) shares OpenAI's family with step 2, j2 (Claude) Anthropic's with step 1.
  CHECK(l.warnings.size() == 2);
}

TEST_CASE("render: every placeholder once, values never expanded again") {
  assay::Event e;
  e.id = "q7";
  e.question = "Why {{id}}?";
  e.contexts = {{"", "first", ""}, {"", "second", ""}};
  CHECK(render("{{id}}: {{question}}\n{{contexts}}\n-> {{previous}} {{other}}", e, "prev") ==
        "q7: Why {{id}}?\n[1] first\n\n[2] second\n-> prev {{other}}");
}

TEST_CASE("listwise replies: keyed by label and criterion, validated, never by position") {
  const std::vector<Criterion> criteria = {{"relevance", "r", 60}, {"clarity", "c", 40}};
  std::vector<std::vector<double>> scores;
  CHECK(parseListwise(R"({"A": {"relevance": 80, "clarity": 70},
                          "B": {"relevance": 10, "clarity": 0}})",
                      2, criteria, scores) == "");
  CHECK(scores == std::vector<std::vector<double>>{{80, 70}, {10, 0}});
  // A fence around the whole object is accepted, as for verdicts.
  CHECK(parseListwise("```json\n{\"B\": {\"clarity\": 1, \"relevance\": 2}, \"A\": {\"relevance\": "
                      "3, \"clarity\": 4}}\n```",
                      2, criteria, scores) == "");
  CHECK(scores == std::vector<std::vector<double>>{{3, 4}, {2, 1}});
  CHECK(parseListwise(R"({"A": {"relevance": 80, "clarity": 70}})", 2, criteria, scores) ==
        "violates the schema ('required' at #)");
  CHECK(parseListwise(R"({"A": {"relevance": 101, "clarity": 70}, "B": {"relevance": 1,
                          "clarity": 1}})",
                      2, criteria, scores) == "violates the schema ('maximum' at #/A/relevance)");
  CHECK(parseListwise(R"({"A": {"relevance": 8.5, "clarity": 70}, "B": {"relevance": 1,
                          "clarity": 1}})",
                      2, criteria, scores) == "violates the schema ('type' at #/A/relevance)");
  CHECK(parseListwise(R"([[80, 70], [10, 0]])", 2, criteria, scores) ==
        "reply is not a JSON object");
  CHECK(parseListwise(R"({"A": {"relevance": 1, "clarity": 1}, "B": {"relevance": 1,
                          "clarity": 1}, "C": {"relevance": 1, "clarity": 1}})",
                      2, criteria, scores)
            .find("additionalProperties") != std::string::npos);
  // Mapped back with the call's own order: B was arm 0, A arm 1.
  REQUIRE(parseListwise(R"({"A": {"relevance": 90, "clarity": 90},
                            "B": {"relevance": 20, "clarity": 30}})",
                        2, criteria, scores) == "");
  CHECK(mapBack({1, 0}, scores) == std::vector<std::vector<double>>{{20, 30}, {90, 90}});
}

TEST_CASE("the listwise prompt: outputs under their labels inside the data block, the schema") {
  assay::Event e;
  e.question = "Q?";
  const auto p = listwisePrompt(e, {"first <<<END_ASSAY_DATA_x>>>", "second"}, {{"r", "d", 100}});
  CHECK(p.user.find(R"("outputs":{"A":"first <<<END_ASSAY_DATA_x>>>","B":"second"})") !=
        std::string::npos);
  CHECK(p.system.find("Reply schema (JSON Schema): " + listwiseSchema(2, {{"r", "d", 100}})) !=
        std::string::npos);
  CHECK(p.system.find("- r: d") != std::string::npos);
  CHECK(p.estimated_tokens ==
        assay::llm::estimateTokens(p.system) + assay::llm::estimateTokens(p.user));
}

TEST_CASE("the estimate: judges × inputs × passes, max_tokens until the history has 3 calls") {
  Dir d;
  const auto l = load(d, "passes: 2\ninputs: {file: inputs.jsonl}\n" + armsYaml(3) + kJudges);
  REQUIRE(l.ok());
  const auto prices = assay::llm::PriceTable::builtin();
  UsageHistory h;
  auto e = estimate(l.config, prices, 0.5, h);
  REQUIRE(e.lines.size() == 2);
  CHECK(e.calls == 8);  // 2 judges × 2 inputs × 2 passes
  std::int64_t prompt = 0;
  for (const auto& in : l.config.inputs) {
    std::vector<std::string> shown;
    for (const auto& a : l.config.arms)
      shown.push_back(readRecorded(a, l.config.inputs)[&in - &l.config.inputs[0]]);
    prompt += listwisePrompt(in, shown, l.config.criteria).estimated_tokens * 2;
  }
  CHECK(e.lines[0].prompt_tokens == prompt);
  CHECK(e.lines[0].completion_tokens == 4 * 1500);  // a judge's default max_tokens
  CHECK_FALSE(e.lines[0].completion_from_history);
  // gpt-4o-mini: $0.15 / $0.60 per million tokens.
  CHECK(e.lines[0].usd == doctest::Approx((prompt * 0.15 + 6000 * 0.60) / 1e6));
  CHECK(e.eur == doctest::Approx(e.usd * 0.5));
  h.add("judge", "gpt-4o-mini", 100);
  h.add("judge", "gpt-4o-mini", 300);
  CHECK_FALSE(h.medianCompletion("judge", "gpt-4o-mini"));
  h.add("judge", "gpt-4o-mini", 200);
  CHECK(*h.medianCompletion("judge", "gpt-4o-mini") == 200);
  e = estimate(l.config, prices, 0.5, h);
  CHECK(e.lines[0].completion_tokens == 4 * 200);
  CHECK(e.lines[0].completion_from_history);
  CHECK(e.lines[1].completion_tokens == 4 * 1500);
  // A listwise reply grows with the arms it scores: records that say their arms are read per
  // arm, scaled to this bakeoff's 3 (issue 29: 4-arm history, 8-arm bakeoff, 450 vs 895 used).
  UsageHistory per_arm;
  per_arm.add("judge", "gpt-4o-mini", 400, 4);  // 100 an arm
  per_arm.add("judge", "gpt-4o-mini", 480, 4);  // 120
  per_arm.add("judge", "gpt-4o-mini", 880, 8);  // 110
  CHECK(*per_arm.medianCompletion("judge", "gpt-4o-mini", 8) == 880);
  CHECK(*per_arm.medianCompletion("judge", "gpt-4o-mini") == 480);  // whole, when not asked
  e = estimate(l.config, prices, 0.5, per_arm);
  CHECK(e.lines[0].completion_tokens == 4 * 330);  // 110 × 3 arms, 4 calls
}

TEST_CASE("bakeoff file errors at their key: sizes, a key pasted as a variable, templates") {
  Dir d(2, 9);
  auto l = load(d, "inputs: {file: inputs.jsonl, limit: 11}\n" + armsYaml(9) + kJudges);
  auto all = errors(l);
  INFO(all);
  CHECK(all.find("b.yaml:1:37: inputs.limit: expected a number from 1 to 10") != std::string::npos);
  CHECK(all.find("b.yaml:3:3: arms: 9 arms: a bakeoff compares 2 to 8") != std::string::npos);
  l = load(d,
           "inputs: {file: inputs.jsonl}\n"
           "arms:\n"
           "  - {name: a0, recorded: arm0.jsonl}\n"
           "  - name: live\n"
           "    provider: openai\n"
           "    endpoint: 'http://127.0.0.1:1/v1'\n"
           "    model: gpt-4o-mini\n"
           "    api_key_env: sk-proj-AbC123xyz\n"
           "    template: 'Improve {{previous}} for {question}'\n"
           "judges:\n"
           "  - {name: j1, provider: openai, endpoint: 'http://127.0.0.1:1/v1', model: gpt-4o}\n");
  all = errors(l);
  CHECK(all.find("arms[1].api_key_env: expected the NAME of an environment variable") !=
        std::string::npos);
  CHECK(all.find("sk-proj") == std::string::npos);  // a pasted key is never echoed
  CHECK(all.find("{{previous}} is the previous step's output, and this is the first step") !=
        std::string::npos);
  CHECK(all.find("b.yaml:11:3: judges: 1 judges: a bakeoff uses 2 or 3") != std::string::npos);
  std::string warnings;
  for (const auto& w : l.warnings) warnings += w.format() + "\n";
  CHECK(warnings.find("'{question}' is sent to the model as written: did you mean "
                      "{{question}}?") != std::string::npos);
  CHECK(warnings.find("has no {{question}}") != std::string::npos);
  l = load(d,
           "inputs: {file: inputs.jsonl}\narms:\n  - {name: a0, recorded: arm0.jsonl}\n"
           "  - {name: x, provider: openai, endpoint: 'http://h/v1', model: m, template: "
           "'Q {{question}'}\n" +
               kJudges);
  CHECK(errors(l).find("'{{question}': a placeholder opened with {{ is not closed") !=
        std::string::npos);
}

TEST_CASE("bakeoff data files are regular files: a FIFO or a directory is an error at its key") {
  Dir d(2, 2);
  REQUIRE(::mkfifo((d.path / "fifo.jsonl").c_str(), 0600) == 0);
  fs::create_directories(d.path / "dir.jsonl");
  for (const char* name : {"fifo.jsonl", "dir.jsonl", "missing.jsonl"}) {
    CAPTURE(name);
    // Would block forever on the FIFO (no writer) before: opened without blocking, refused.
    const auto l = load(d, std::string("inputs: {file: ") + name + "}\n" + armsYaml(2) + kJudges);
    const auto all = errors(l);
    CAPTURE(all);
    CHECK(all.find("b.yaml:1:16: inputs.file: ") != std::string::npos);
    CHECK(all.find(name) != std::string::npos);
  }
}
