#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "sinks/jsonl_sink.hpp"
#include "sinks/judgment.hpp"
#include "sinks/metrics.hpp"
#include "sinks/registry.hpp"

using namespace assay;

namespace {
Judgment sample() {
  Judgment j{"req-1", "acme", "faq", "B", 1795959725120, {}};
  j.verdicts.push_back({"rouge_l", "answer_correctness", Verdict::ok(0.7272727), 0, 1, 0.012});
  j.verdicts.push_back({"citation", "citation", Verdict::check(false, "no [n]"), 0, 1, 0.001});
  j.verdicts.push_back(
      {"context_overlap", "faithfulness", Verdict::fail(Outcome::kNoContext), 0, 1, 0.002});
  return j;
}
}  // namespace

TEST_CASE("judgment JSON follows CONTRACT.md §3") {
  CHECK(formatRfc3339(1795959725120) == "2026-11-29T13:42:05.120Z");
  CHECK(formatRfc3339(0) == "1970-01-01T00:00:00.000Z");
  const std::string json = toJson(sample());
  CHECK(json.find('\n') == std::string::npos);
  rapidjson::Document d;
  d.Parse(json.c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(std::string(d["id"].GetString()) == "req-1");
  CHECK(std::string(d["variant"].GetString()) == "B");
  CHECK(std::string(d["judged_at"].GetString()) == "2026-11-29T13:42:05.120Z");
  const auto& v = d["verdicts"];
  REQUIRE(v.Size() == 3);
  CHECK(v[0]["score"].GetDouble() == doctest::Approx(0.727273));
  CHECK_FALSE(v[0].HasMember("passed"));
  CHECK_FALSE(v[0].HasMember("error"));
  CHECK(v[1]["passed"].GetBool() == false);
  CHECK(std::string(v[1]["evidence"].GetString()) == "no [n]");
  CHECK(v[2]["score"].IsNull());
  CHECK(std::string(v[2]["error"].GetString()) == "no_context");
  CHECK(v[2]["latency_ms"].GetDouble() == doctest::Approx(0.002));
}

TEST_CASE("label folding bounds cardinality") {
  LabelFolder f(2);
  CHECK(f.fold("a") == "a");
  CHECK(f.fold("b") == "b");
  CHECK(f.fold("c") == "other");
  CHECK(f.fold("a") == "a");
  CHECK(f.fold("") == "none");
  LabelFolder long_values(10);
  CHECK(long_values.fold(std::string(300, 'x')) == std::string(128, 'x'));
  std::string euros;
  for (int i = 0; i < 60; ++i) euros += "\u20ac";  // 3 bytes each: cut at 126, not inside one
  CHECK(long_values.fold(euros).size() == 126);
}

TEST_CASE("metrics: names, labels, and promtool check metrics accepts the exposition") {
  Metrics m("rag.events", {{"rouge_l", "answer_correctness", {0.5, 1.0}}}, 1, "9.9.9");
  m.consumed.Increment(3);
  m.invalid[static_cast<int>(InvalidReason::kNotUtf8)]->Increment();
  m.countSampled("acme");
  m.countSampled("globex");  // beyond max_label_values = 1 → other
  m.countRun(0, Outcome::kOk);
  m.judge[0].score->Observe(0.7);
  m.judge[0].latency->Observe(0.0001);
  const std::string text = m.serialize();
  CHECK(text.find("assay_events_consumed_total{topic=\"rag.events\"} 3") != std::string::npos);
  CHECK(text.find("assay_events_invalid_total{reason=\"not_utf8\"} 1") != std::string::npos);
  CHECK(text.find("assay_events_invalid_total{reason=\"too_large\"} 0") != std::string::npos);
  CHECK(text.find("assay_events_sampled_total{tenant=\"acme\"} 1") != std::string::npos);
  CHECK(text.find("assay_events_sampled_total{tenant=\"other\"} 1") != std::string::npos);
  CHECK(text.find("assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
                  "outcome=\"ok\"} 1") != std::string::npos);
  CHECK(text.find("assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
                  "outcome=\"no_reference\"} 0") != std::string::npos);
  CHECK(text.find("assay_judge_score_bucket{criterion=\"answer_correctness\",judge=\"rouge_l\",le="
                  "\"1\"} 1") != std::string::npos);
  CHECK(text.find("assay_judge_score_bucket{criterion=\"answer_correctness\",judge=\"rouge_l\",le="
                  "\"0.5\"} 0") != std::string::npos);
  CHECK(text.find("assay_build_info{version=\"9.9.9\"} 1") != std::string::npos);
  // A cheap judge does not export LLM outcomes until one happens.
  CHECK(text.find("outcome=\"skipped_budget\"") == std::string::npos);
  m.countRun(0, Outcome::kSkippedBudget);
  CHECK(m.serialize().find("assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_"
                           "l\",outcome=\"skipped_budget\"} 1") != std::string::npos);
  CHECK(text.find("assay_queue_depth 0") != std::string::npos);
  CHECK(text.find("assay_samples_dropped_total{reason=\"queue_full\"} 0") != std::string::npos);

  const std::string path = "/tmp/assay_metrics_" + std::to_string(::getpid()) + ".prom";
  std::ofstream(path) << text;
  const int rc =
      std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::ifstream out(path + ".out");
  const std::string report((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  INFO("promtool said: " << report);
  CHECK(rc == 0);
  std::remove(path.c_str());
  std::remove((path + ".out").c_str());
}

TEST_CASE("JSONL sink appends one line per judgment and releases the delivery token") {
  const std::string dir = "/tmp/assay_jsonl_" + std::to_string(::getpid());
  Metrics m("t", {}, 10, "x");
  SinksOptions o;
  o.jsonl_enabled = true;
  o.jsonl.path = dir + "/sub/j.jsonl";  // parent folders are created
  auto sinks = createSinks(o, SinkContext{&m, nullptr, ""});
  REQUIRE(sinks.size() == 1);
  CHECK(sinks[0]->name() == "jsonl");
  int finished = 0;
  for (int i = 0; i < 3; ++i) {
    DeliveryToken token(nullptr, [&](void*) { ++finished; });
    const auto j = sample();
    sinks[0]->write(j, toJson(j), token);
    token.reset();
  }
  CHECK(finished == 3);
  sinks[0]->flush();
  std::ifstream in(o.jsonl.path);
  int lines = 0;
  for (std::string l; std::getline(in, l);) {
    rapidjson::Document d;
    d.Parse(l.c_str());
    CHECK_FALSE(d.HasParseError());
    ++lines;
  }
  CHECK(lines == 3);
  CHECK(m.serialize().find("assay_sink_writes_total{result=\"ok\",sink=\"jsonl\"} 3") !=
        std::string::npos);
  std::filesystem::remove_all(dir);

  SinksOptions bad;
  bad.jsonl_enabled = true;
  bad.jsonl.path = "/proc/no/such/dir/j.jsonl";
  CHECK_THROWS_AS(createSinks(bad, SinkContext{&m, nullptr, ""}), std::runtime_error);
}
