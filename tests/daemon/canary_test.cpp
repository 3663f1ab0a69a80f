// The judges' drift canary (daemon/canary.hpp, docs/canary.md): the canary file read and
// bounded, its statistics against scipy/sklearn, and a run against the fake provider that
// catches the provider answering one level higher, without paying twice after a restart and
// without touching the production series.
#include "daemon/canary.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/loader.hpp"
#include "core/clock.hpp"
#include "judges/llm/http_client.hpp"
#include "tests/llm/fake_server.hpp"
#include "tests/llm/redis_server.hpp"
#include "tests/metric_value.hpp"
#include "tests/wait.hpp"

using namespace assay;

namespace {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("assay_canary_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

const std::vector<int> kScores = {4, 3, 1, 2, 4, 3, 2, 4, 3, 2};
const std::vector<int> kBad = {0, 0, 1, 1, 0, 0, 1, 0, 1, 1};
const std::vector<int> kHuman = {4, 2, 4, 3, 1, 3, 3, 4, 2, 2};

/// An events line whose answer carries the fake provider's score marker.
std::string line(int i, int score, bool bad) {
  return fmt::format(
      R"({{"id":"c{}","question":"How long is the warranty?","answer":"Two years. [[fake-score:{}]]","contexts":[{{"id":"1","text":"The warranty lasts two years."}}],"labels":{{"hallucinated":{}}}}})",
      i, score, bad ? "true" : "false");
}

std::optional<double> value(prometheus::Registry& r, const std::string& name,
                            const std::map<std::string, std::string>& labels) {
  return test::metricValue(r, name, labels);
}

}  // namespace

TEST_CASE("canary statistics equal scipy and sklearn on the same vectors") {
  // Golden values: sklearn.metrics.roc_auc_score(bad, 4 - scores), scipy.stats.spearmanr,
  // kendalltau (tau-b), sklearn cohen_kappa_score (weights None and 'quadratic').
  std::vector<CanaryItem> items(kScores.size());
  std::vector<std::pair<double, const CanaryItem*>> bools, numbers;
  for (std::size_t i = 0; i < kScores.size(); ++i) {
    items[i].bad = kBad[i] != 0;
    bools.emplace_back(kScores[i], &items[i]);
  }
  const auto b = canaryStatistics(bools, 2, 1, 4);
  CHECK(b.scored == 10);
  CHECK(b.failed == 2);
  CHECK(*b.mean == doctest::Approx(2.8));
  CHECK(b.agreement.at("roc_auc") == doctest::Approx(0.96).epsilon(1e-12));
  CHECK(b.agreement.count("spearman") == 0);  // a boolean label has no rank correlation here
  std::vector<CanaryItem> human(kScores.size());
  for (std::size_t i = 0; i < kScores.size(); ++i) {
    human[i].number = kHuman[i];
    numbers.emplace_back(kScores[i], &human[i]);
  }
  const auto n = canaryStatistics(numbers, 0, 1, 4);
  CHECK(n.agreement.at("spearman") == doctest::Approx(-0.07189542483660129).epsilon(1e-12));
  CHECK(n.agreement.at("kendall_tau") == doctest::Approx(-0.1111111111111111).epsilon(1e-12));
  CHECK(n.agreement.at("kappa") == doctest::Approx(0.16666666666666674).epsilon(1e-12));
  CHECK(n.agreement.at("kappa_quadratic") == doctest::Approx(-0.14583333333333348).epsilon(1e-12));
  CHECK(n.agreement.count("roc_auc") == 0);
  // Labels off the judge's scale: no kappa (the scales do not match), correlations still.
  for (auto& h : human) *h.number /= 4;
  const auto off = canaryStatistics(numbers, 0, 1, 4);
  CHECK(off.agreement.count("kappa") == 0);
  CHECK(off.agreement.at("spearman") == doctest::Approx(-0.07189542483660129).epsilon(1e-12));
  // Fewer than 5 scores: nothing but the counts.
  numbers.resize(4);
  const auto few = canaryStatistics(numbers, 6, 1, 4);
  CHECK_FALSE(few.mean);
  CHECK(few.agreement.empty());
}

TEST_CASE("the canary file: bounded, invalid and unlabelled lines counted, a stable sample") {
  TempDir dir;
  CanaryOptions o;
  o.file = (dir.path / "canary.jsonl").string();
  o.sample = 3;
  {
    std::ofstream f(o.file);
    for (int i = 0; i < 6; ++i) f << line(i, 3, i % 2 == 0) << "\n";
    f << "not json\n\n";
    f << line(0, 3, false) << "\n";  // line 9: the id of line 1 again
    f << R"({"id":"u","question":"q","answer":"a","labels":{"hallucinated":"yes"}})"
      << "\n";
  }
  const EventFieldOptions fields;
  const auto set = loadCanarySet(o, fields, 1 << 20);
  CHECK(set.lines == 9);
  CHECK(set.invalid == 2);
  CHECK(set.unlabelled == 1);
  REQUIRE(set.problems.size() == 2);  // logged as warnings; the unlabelled one is not a problem
  CHECK(set.problems[0].rfind(o.file + ":7: not an event (not_json", 0) == 0);
  CHECK(set.problems[1] == o.file + ":9: repeats the id of line 1 (ignored)");
  CHECK(set.first_unlabelled == o.file + ":10");
  REQUIRE(set.items.size() == 3);
  // The same three whatever the file's order.
  {
    std::ofstream f(o.file);
    for (int i = 5; i >= 0; --i) f << line(i, 3, i % 2 == 0) << "\n";
  }
  const auto again = loadCanarySet(o, fields, 1 << 20);
  for (std::size_t i = 0; i < 3; ++i) CHECK(again.items[i].event.id == set.items[i].event.id);
  // Nothing labelled, or too many lines: an error naming the file.
  std::ofstream(o.file) << "not json\n";
  CHECK_THROWS_WITH(loadCanarySet(o, fields, 1 << 20),
                    (o.file + ": no labelled event (1 lines: 1 not events, 0 without a boolean or "
                              "number at /labels/hallucinated)")
                        .c_str());
  {
    std::ofstream f(o.file);
    for (std::size_t i = 0; i <= kMaxCanaryLines; ++i) f << "{}\n";
  }
  CHECK_THROWS_WITH(loadCanarySet(o, fields, 1 << 20),
                    doctest::Contains("has more than 100000 lines"));
}

TEST_CASE("canary: a provider one level higher is caught; a restart does not pay again") {
  // Issue 31: a judge whose provider starts answering one level higher under the same name.
  test::RedisServer redis;
  test::FakeLlmServer fake;
  TempDir dir;
  const std::string file = (dir.path / "canary.jsonl").string();
  {
    std::ofstream f(file);
    // Faithful answers scored 3 or 4, hallucinated ones 1 or 2: the judge agrees with the labels.
    for (int i = 0; i < 20; ++i) f << line(i, i % 2 ? 1 + i % 4 / 2 : 3 + i % 4 / 2, i % 2) << "\n";
  }
  const auto loaded = loadConfigString(
      fmt::format(R"(
budget: {{store: "{}", daily_limit_eur: 1}}
judges:
  - {{name: faith, kind: llm, criterion: faithfulness, endpoint: "{}", model: gpt-4o-mini,
     api_key_env: ASSAY_CANARY_TEST_KEY, max_in_flight: 4}}
  - {{name: overlap, kind: lexical, metric: context_overlap}}
  - {{name: rouge, kind: lexical, metric: rouge_l}}
canary: {{file: "{}", sample: 20, state_file: "{}"}}
)",
                  redis.url(), fake.url("/v1"), file, (dir.path / "state.json").string()),
      "canary_test.yaml");
  ::setenv("ASSAY_CANARY_TEST_KEY", "sk-test", 1);
  REQUIRE(loaded.ok());
  const Config& config = loaded.config;
  const auto requests = [&] {
    llm::HttpClient client;
    llm::HttpRequest r;
    r.url = fake.url("/_fake/stats");
    r.method = "GET";
    const auto res = client.send(r);
    return std::stol(res.body.substr(res.body.find(':') + 1));
  };
  const auto faith = [&](prometheus::Registry& r, const std::string& name,
                         std::map<std::string, std::string> more = {}) {
    more["judge"] = "faith";
    return value(r, name, more);
  };
  prometheus::Registry registry;
  JudgeStats judge_stats(registry);
  BoundedQueue<WorkItem> queue(10);
  const auto canarySet = [&] {
    return loadCanarySet(config.canary, config.events, config.limits.max_event_bytes);
  };
  {
    JudgeServices services(config.budget, registry);  // one process's
    JudgeRunner runner(buildJudges(config, services), judge_stats, queue, {}, 0, &services);
    Canary canary(config, runner, registry, canarySet(), 1e9);  // no scheduled run
    const auto first = canary.runOnce(60, 1);
    CHECK(first.at("faith").scored == 20);
    CHECK(first.at("faith").agreement.at("roc_auc") == 1.0);
    CHECK(*first.at("faith").mean == 2.5);
    CHECK(*faith(registry, "assay_canary_mean_shift") == 0.0);  // its own first run
    CHECK(requests() == 20);
    // No reference in the canary lines: rouge cannot judge them, which is not a failure.
    CHECK(first.at("rouge").scored == 0);
    CHECK(first.at("rouge").not_scored == 20);
    CHECK(first.at("rouge").failed == 0);
    CHECK(first.at("faith").not_scored == 0);
    CHECK(value(registry, "assay_canary_verdicts",
                {{"judge", "rouge"},
                 {"judge_version", config.judges[2].version->id},
                 {"result", "not_scored"}}) == 20.0);
  }
  // A restart within the period: new judges and canary, the same Redis and state file. The
  // verdict store re-emits the 20 verdicts: nothing is called, nothing paid, again.
  JudgeServices services(config.budget, registry);
  JudgeRunner runner(buildJudges(config, services), judge_stats, queue, {}, 0, &services);
  Canary canary(config, runner, registry, canarySet(), 1e9);
  CHECK(canary.runOnce(60, 1).at("faith").scored == 20);
  CHECK(requests() == 20);
  {  // canary.judges: only the judges listed are called
    Config only = config;
    only.canary.judges = {"overlap"};
    Canary some(only, runner, registry, canarySet(), 1e9);
    const auto run = some.runOnce(60, 7);  // another period: faith would call again
    CHECK(run.size() == 1);
    CHECK(run.count("overlap") == 1);
    CHECK(requests() == 20);
  }
  // The provider moves one level up; the next period's run calls again and sees it.
  llm::HttpClient client;
  llm::HttpRequest shift;
  shift.url = fake.url("/_fake/shift");
  shift.body = R"({"levels": 1})";
  REQUIRE(client.send(shift).status == 200);
  const auto after = canary.runOnce(60, 2);
  CHECK(requests() == 40);
  const double shift_value = *faith(registry, "assay_canary_mean_shift");
  MESSAGE("one level higher: mean " << *after.at("faith").mean << ", mean shift " << shift_value
                                    << " of the scale, roc_auc "
                                    << after.at("faith").agreement.at("roc_auc"));
  CHECK(shift_value >= 0.2);  // 5 of 20 already at the top: (+15 levels / 20) / 3 = 0.25
  CHECK(shift_value == doctest::Approx(0.25));
  // The first run came from the state file: this canary is a new object.
  CHECK(*faith(registry, "assay_canary_baseline_mean_score") == doctest::Approx(2.5));
  // The local judge did not move.
  CHECK(*value(registry, "assay_canary_mean_shift", {{"judge", "overlap"}}) == 0.0);
  // Canary verdicts are in no production series.
  CHECK_FALSE(value(registry, "assay_judge_runs_total", {{"judge", "faith"}, {"outcome", "ok"}})
                  .value_or(0) > 0);
}

TEST_CASE("canary: a hostile state file is set aside, never a crash at start-up") {
  // The hostile trial: a state file nested 8 million deep crashed assayd at every start.
  TempDir dir;
  const std::string file = (dir.path / "canary.jsonl").string();
  const std::string state = (dir.path / "state.json").string();
  {
    std::ofstream f(file);
    for (int i = 0; i < 10; ++i) f << line(i, 3, i % 2) << "\n";
  }
  std::ofstream(state) << "{\"overlap\":" << std::string(8'000'000, '[');
  const auto loaded = loadConfigString(
      fmt::format("judges:\n  - {{name: overlap, kind: lexical, metric: context_overlap}}\n"
                  "canary: {{file: \"{}\", sample: 10, state_file: \"{}\"}}\n",
                  file, state),
      "canary_state_test.yaml");
  REQUIRE(loaded.ok());
  prometheus::Registry registry;
  JudgeStats judge_stats(registry);
  BoundedQueue<WorkItem> queue(10);
  JudgeServices services(loaded.config.budget, registry);
  JudgeRunner runner(buildJudges(loaded.config, services), judge_stats, queue, {}, 0, &services);
  Canary canary(loaded.config, runner, registry,
                loadCanarySet(loaded.config.canary, loaded.config.events,
                              loaded.config.limits.max_event_bytes),
                1e9);
  const auto run = canary.runOnce(60, 1);
  CHECK(run.at("overlap").scored == 10);
  // Its first run is the baseline now, and the state file is rewritten as a valid object.
  CHECK(value(registry, "assay_canary_mean_shift", {{"judge", "overlap"}}) == 0.0);
  std::string text;
  std::getline(std::ifstream(state), text, '\0');
  rapidjson::Document d;
  CHECK_FALSE(d.Parse(text.c_str()).HasParseError());
  CHECK(d.IsObject());
  CHECK(d.HasMember("overlap"));
}
