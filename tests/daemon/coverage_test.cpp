// Coverage you can add up (daemon/coverage.hpp, docs/metrics.md "Coverage"): every consumed
// event ends in exactly one terminal counter per judge, through every path a pipeline takes:
// invalid, screened out by its key, sampled out by a tenant rule, dropped on a full queue,
// judged (scored, could not judge, skipped by a judge's rate or run_if), judged after a reload
// that added and removed judges, and dropped at the stop. (Redelivered messages, stored
// verdicts and calls abandoned at the stop are checked end to end by
// tests/integration/test_kill_restart.py and test_llm_shutdown.py.)
#include "daemon/coverage.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/loader.hpp"
#include "daemon/pipeline.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("assay_coverage_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

double total(const prometheus::Registry& r, const std::string& family,
             const std::string& label = "", const std::string& value = "") {
  double n = 0;
  for (const auto& f : r.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      bool match = label.empty();
      for (const auto& l : m.label) match = match || (l.name == label && l.value == value);
      if (match) n += f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return n;
}

std::string configText(const std::string& jsonl, bool reloaded,
                       const std::string& when_full = "drop_newest") {
  std::string judges =
      "  - {name: nonempty, kind: check, check: answer_nonempty}\n"
      "  - {name: overlap, kind: lexical, metric: context_overlap, rate: 0.5}\n";
  judges += reloaded ? "  - {name: refusal, kind: check, check: refusal}\n"
                     : "  - {name: overlap2, kind: lexical, metric: token_f1,\n"
                       "     run_if: [{judge: overlap, below: 0.5}]}\n";
  return R"(
kafka: {brokers: embedded, topic: t, group_id: g, partitions: 2}
sampling:
  rate: 0.5
  rules: [{match: {tenant: acme}, rate: 0.1}]
limits: {queue_capacity: 6, when_full: )" +
         when_full + R"(, drain_timeout_ms: 100}
judges:
)" + judges +
         R"(admin: {listen: "127.0.0.1:0"}
sinks: {jsonl: {path: ")" +
         jsonl + R"("}}
)";
}

}  // namespace

TEST_CASE("coverage: every consumed event in one terminal counter per judge, on every path") {
  TempDir dir;
  const auto events = (dir.path / "events.jsonl").string();
  const auto jsonl = (dir.path / "judgments.jsonl").string();
  {
    std::ifstream dev(std::string(test::kSharedDataDir) + "/rag_events_dev.jsonl");
    std::ofstream out(events);
    std::string line;
    for (int i = 0; i < 40 && std::getline(dev, line); ++i) {
      if (i % 3 == 0) line.insert(1, "\"tenant\": \"acme\", ");  // a rule at 0.1
      out << line << "\n";
    }
    out << "this is not JSON\n";
    out << R"({"question": "where is it?"})"
        << "\n";  // no answer: missing_field
  }
  const auto loaded = loadConfigString(configText(jsonl, false), "coverage_test.yaml");
  REQUIRE(loaded.ok());
  const auto reload = loadConfigString(configText(jsonl, true), "coverage_test.yaml");
  REQUIRE(reload.ok());
  RunOptions run;
  run.replay_file = events;
  run.no_workers = true;  // judged on this thread, when the test says
  Pipeline p(loaded.config, run);
  const auto& reg = p.registry();
  const auto consumeAll = [&](double target) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline &&
           total(reg, "assay_events_consumed_total") < target)
      REQUIRE(p.pollOnce(100));
    REQUIRE(total(reg, "assay_events_consumed_total") == target);
  };
  const auto holds = [&](const char* when) {
    const Coverage c = coverageOf(reg.Collect());
    CAPTURE(when);
    for (const auto& [judge, gap] : c.unaccounted) {
      const std::string name = judge;  // not a structured binding: CAPTURE is a lambda
      const double unaccounted = gap;
      CAPTURE(name);
      CHECK(unaccounted == 0);
    }
    return c;
  };

  // 1. 42 messages: invalid, screened out, sampled out by the rule, six queued, the rest
  // dropped (queue_full); then the six judged by the first judges.
  p.replay();
  consumeAll(42);
  CHECK(holds("queued").inFlight() == 6);
  CHECK(p.judgeQueued() == 6);
  CHECK(holds("judged").inFlight() == 0);
  CHECK(total(reg, "assay_events_invalid_total") == 2);
  CHECK(total(reg, "assay_events_sampled_out_total") > 0);
  CHECK(total(reg, "assay_samples_dropped_total", "reason", "queue_full") > 0);
  CHECK(total(reg, "assay_judge_skipped_total", "reason", "rate") > 0);
  CHECK(total(reg, "assay_judge_skipped_total", "reason", "run_if") > 0);
  CHECK(total(reg, "assay_judge_runs_total") > 0);

  // 2. A reload removes overlap2 and adds refusal: refusal counts the six events completed
  // before it existed as not_configured; the next six events count overlap2's the same way.
  REQUIRE(p.replaceJudges(std::make_unique<Config>(reload.config), "test"));
  CHECK(total(reg, "assay_judge_skipped_total", "judge", "refusal") == 6);
  p.replay();
  consumeAll(84);
  CHECK(p.judgeQueued() == 6);
  CHECK(holds("after the reload").inFlight() == 0);
  CHECK(total(reg, "assay_judge_skipped_total", "reason", "not_configured") == 12);

  // 3. Six more queued, then the stop: judged while draining.
  p.replay();
  consumeAll(126);
  p.shutdown();
  const Coverage c = holds("after the stop");
  CHECK(c.inFlight() == 0);
  CHECK(c.consumed == 126);
  CHECK(c.unaccounted.size() == 4);  // nonempty, overlap, overlap2, refusal
}

TEST_CASE("coverage: samples held back by a full backlog and dropped at the stop") {
  // limits.when_full: block: past queue_capacity the backlog holds samples and pauses
  // consumption; the stop drops what it holds (assay_samples_dropped_total{reason=shutdown},
  // redelivered after a restart).
  TempDir dir;
  const auto events = (dir.path / "events.jsonl").string();
  {
    std::ifstream dev(std::string(test::kSharedDataDir) + "/rag_events_dev.jsonl");
    std::ofstream out(events);
    std::string line;
    for (int i = 0; i < 80 && std::getline(dev, line); ++i) out << line << "\n";
  }
  const auto loaded = loadConfigString(configText((dir.path / "j.jsonl").string(), false, "block"),
                                       "coverage_test.yaml");
  REQUIRE(loaded.ok());
  RunOptions run;
  run.replay_file = events;
  run.no_workers = true;
  Pipeline p(loaded.config, run);
  const auto& reg = p.registry();
  p.replay();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline &&
         total(reg, "assay_consumer_pauses_total") == 0)
    REQUIRE(p.pollOnce(100));
  REQUIRE(total(reg, "assay_consumer_pauses_total") > 0);
  const Coverage before = coverageOf(reg.Collect());
  CHECK(before.inFlight() > 6);  // six queued, the rest held back
  p.shutdown();
  CHECK(total(reg, "assay_samples_dropped_total", "reason", "shutdown") > 0);
  const Coverage c = coverageOf(reg.Collect());
  CHECK(c.inFlight() == 0);
  REQUIRE(c.unaccounted.size() == 3);
  for (const auto& [judge, gap] : c.unaccounted) {
    const std::string name = judge;  // not a structured binding: CAPTURE is a lambda
    const double unaccounted = gap;
    CAPTURE(name);
    CHECK(unaccounted == 0);
  }
}

TEST_CASE("coverage: a scrape reads assay_events_finished_total before every terminal counter") {
  // docs/metrics.md, "Coverage": read first, it can only lag the terminal counters, so a
  // scrape's own timing never shows a positive gap.
  RunOptions run;
  run.no_workers = true;
  const auto loaded = loadConfigString(configText("/dev/null", false), "coverage_test.yaml");
  REQUIRE(loaded.ok());
  Pipeline p(loaded.config, run);
  const auto families = p.registry().Collect();
  std::size_t finished = families.size();
  for (std::size_t i = 0; i < families.size(); ++i) {
    const auto& name = families[i].name;
    if (name == "assay_events_finished_total") finished = i;
    if (name == "assay_events_replay_skipped_total" || name == "assay_events_invalid_total" ||
        name == "assay_events_sampled_out_total" || name == "assay_samples_dropped_total" ||
        name == "assay_judge_runs_total" || name == "assay_judge_skipped_total" ||
        name == "assay_judge_abandoned_total") {
      CAPTURE(name);
      CHECK(finished < i);
    }
  }
  CHECK(finished < families.size());
}
