#include "cli/report.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

using namespace assay;

namespace {
std::vector<bool> b(std::initializer_list<int> v) {
  std::vector<bool> out;
  for (int x : v) out.push_back(x != 0);
  return out;
}
}  // namespace

TEST_CASE("ROC AUC equals sklearn.metrics.roc_auc_score, ties included") {
  // Golden values: tests/golden/auc_golden.py.
  CHECK(*rocAuc({0.1, 0.4, 0.35, 0.8}, b({0, 0, 1, 1})) == doctest::Approx(0.75).epsilon(1e-12));
  CHECK(*rocAuc({0.5, 0.5, 0.5, 0.5}, b({0, 1, 0, 1})) == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(*rocAuc({1, 2, 2, 3, 3, 3, 4, 1, 2, 4}, b({0, 0, 1, 1, 0, 1, 1, 0, 0, 1})) ==
        doctest::Approx(0.88).epsilon(1e-12));
  CHECK(*rocAuc({0.9, 0.8, 0.7, 0.6, 0.5, 0.4}, b({0, 0, 0, 1, 1, 1})) == doctest::Approx(0.0));
  CHECK(*rocAuc({0.2, 0.2, 0.7, 0.1, 0.9, 0.3, 0.3, 0.65, 0.3, 0.05, 0.5, 0.5},
                b({1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0})) ==
        doctest::Approx(0.8333333333333334).epsilon(1e-12));
  CHECK_FALSE(rocAuc({0.1, 0.2}, b({1, 1})).has_value());  // one class only: undefined
  CHECK_FALSE(rocAuc({}, {}).has_value());
}

TEST_CASE("assay report: outcomes, distributions and AUC from files") {
  const std::string dir = "/tmp/assay_report_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream j(dir + "/j.jsonl");
    // context_overlap: faithful answers high, hallucinated low, one tie across classes.
    const char* rows[][2] = {{"a", "0.9"}, {"b", "0.8"}, {"c", "0.3"}, {"d", "0.5"}, {"e", "0.5"}};
    for (auto& r : rows)
      j << R"({"id":")" << r[0]
        << R"(","verdicts":[{"judge":"context_overlap","criterion":"faithfulness","score":)" << r[1]
        << R"(,"min":0,"max":1,"latency_ms":0.1},{"judge":"citation","criterion":"citation","score":null,"min":0,"max":1,"latency_ms":0.1,"error":"no_context"}]})"
        << "\n";
    j << "not json\n";
    std::ofstream e(dir + "/e.jsonl");
    const char* labels[][3] = {{"a", "false", "x"}, {"b", "false", "x"}, {"c", "true", "x"},
                               {"d", "true", "y"},  {"e", "false", "y"}, {"f", "true", "y"}};
    for (auto& l : labels)
      e << R"({"id":")" << l[0] << R"(","labels":{"hallucinated":)" << l[1]
        << R"(,"source_dataset":")" << l[2] << "\"}}\n";
    e << R"({"id":"g","labels":{"hallucinated":null}})"
      << "\n";
  }
  std::ostringstream out;
  ReportOptions o;
  o.judgments_path = dir + "/j.jsonl";
  o.events_path = dir + "/e.jsonl";
  CHECK(runReport(o, out) == 0);
  const std::string s = out.str();
  MESSAGE(s);
  CHECK(s.find("judgments: 5 events") != std::string::npos);
  CHECK(s.find("(1 unreadable lines skipped)") != std::string::npos);
  CHECK(s.find("citation           citation             runs    5: no_context=5") !=
        std::string::npos);
  // positives c (0.3), d (0.5) vs negatives a (0.9), b (0.8), e (0.5): ranking by 1 − score,
  // pairs won: c beats all 3, d beats a and b and ties e → (3 + 2.5) / 6 = 0.917.
  CHECK(s.find("ROC AUC 0.917  (positive 2 / negative 3; 1 labelled events without a score)") !=
        std::string::npos);
  CHECK(s.find("x              AUC 1.000  (1 / 2)") != std::string::npos);
  CHECK(s.find("y              AUC 0.500  (1 / 1)") != std::string::npos);
  o.judgments_path = dir + "/missing.jsonl";
  CHECK(runReport(o, out) == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("assay report: leniency, drift, agreement between judges and with human labels") {
  const std::string dir = "/tmp/assay_report_track_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  // The issue's vectors: judge [4,2,3,4,1,3,2,4,3,2] vs [4,2,4,3,1,3,3,4,2,2] → tau-b 0.6944,
  // Spearman 0.7647 (p 0.0100).
  const int a[] = {4, 2, 3, 4, 1, 3, 2, 4, 3, 2}, h[] = {4, 2, 4, 3, 1, 3, 3, 4, 2, 2};
  {
    std::ofstream j(dir + "/j.jsonl"), e(dir + "/e.jsonl");
    for (int i = 0; i < 10; ++i) {
      j << R"({"id":"e)" << i << R"(","verdicts":[)"
        << R"({"judge":"faith_llm","criterion":"faithfulness","score":)" << a[i]
        << R"(,"min":1,"max":4},{"judge":"faith_mini","criterion":"faithfulness","score":)" << h[i]
        << R"(,"min":1,"max":4},)"
        << R"({"judge":"nonempty","criterion":"non_empty","score":1,"min":0,"max":1,"passed":true}]})"
        << "\n";
      e << R"({"id":"e)" << i << R"(","labels":{"hallucinated":false,"faithfulness":)" << h[i]
        << "}}\n";
    }
  }
  std::ostringstream out;
  ReportOptions o;
  o.judgments_path = dir + "/j.jsonl";
  o.events_path = dir + "/e.jsonl";
  o.auc_judges.clear();
  CHECK(runReport(o, out) == 0);
  const std::string s = out.str();
  MESSAGE(s);
  CHECK(s.find("faith_llm          top  30.0 %  bottom  10.0 %  distinct    4  entropy 0.95  "
               "lenient n/a  drift n/a (needs 300 scores)") != std::string::npos);
  CHECK(s.find("nonempty           top 100.0 %  bottom   0.0 %  distinct    1  entropy 0.00  "
               "lenient n/a (pass/fail)") != std::string::npos);
  CHECK(s.find("faithfulness      faith_llm vs faith_mini: n 10, tau-b 0.694, Spearman 0.765 -> "
               "moderate") != std::string::npos);
  CHECK(s.find("faith_llm          n 10, Spearman 0.765 (p 0.00998), tau-b 0.694") !=
        std::string::npos);
  CHECK(s.find("faith_mini         n 10, Spearman 1.000 (p 0), tau-b 1.000") != std::string::npos);
  // The daemon's tracking settings (assay report --config): leniency over 5 scores.
  o.tracking.min_samples = 5;
  std::ostringstream out5;
  CHECK(runReport(o, out5) == 0);
  CHECK(out5.str().find("faith_llm          top  30.0 %  bottom  10.0 %  distinct    4  entropy "
                        "0.95  lenient no   drift n/a (needs 300 scores)") != std::string::npos);
  CHECK(out5.str().find("[below tracking.min_pairs 30: the daemon exports no statistic yet]") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "assay report: an empty judgments file is 'none yet' (0); lines without a judgment are 2") {
  const std::string dir = "/tmp/assay_report_empty_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/empty.jsonl").close();  // what assayd leaves before its first judgment
  std::ofstream(dir + "/blank.jsonl") << "\n\n";
  std::ofstream(dir + "/events.jsonl") << R"({"id":"a","question":"q","answer":"x"})"
                                       << "\n";
  ReportOptions o;
  for (const char* name : {"/empty.jsonl", "/blank.jsonl"}) {
    std::ostringstream out, err;
    o.judgments_path = dir + name;
    CHECK(runReport(o, out, err) == 0);
    CHECK(out.str() == "judgments: none yet in " + dir + name +
                           " (the file is empty: assayd has judged nothing so far; "
                           "assay_events_consumed_total and assay_events_sampled_total on its "
                           "/metrics say whether it consumes and samples)\n");
    CHECK(err.str().empty());
  }
  std::ostringstream out, err;
  o.judgments_path = dir + "/events.jsonl";  // the wrong file: an error, not "none yet"
  CHECK(runReport(o, out, err) == 2);
  CHECK(out.str().empty());
  CHECK(err.str() == "assay report: '" + dir +
                         "/events.jsonl' holds no judgment (1 non-empty lines, none a judgment "
                         "object with id and verdicts)\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("cascade curve: LLM share and recall at every threshold, and the one for a recall") {
  // Scores of 8 events (a LOW score predicts the positive label), positives marked 1:
  //   0.1(1) 0.2(1) 0.2(0) 0.4(1) 0.6(0) 0.7(1) 0.9(0) 0.9(0); 4 positives.
  const std::vector<double> s = {0.9, 0.2, 0.1, 0.6, 0.4, 0.2, 0.7, 0.9};
  const auto l = b({0, 1, 1, 0, 1, 0, 1, 0});
  const auto curve = cascadeCurve(s, l);
  REQUIRE(curve.size() == 6);  // distinct scores 0.1 0.2 0.4 0.6 0.7 0.9
  // below 0.15: {0.1} → share 1/8, recall 1/4; below 0.3: + both 0.2 → 3/8, 2/4;
  // below 0.5: + 0.4 → 4/8, 3/4; below 0.65: 5/8, 3/4; below 0.8: 6/8, 4/4; then everything.
  const double share[] = {1 / 8.0, 3 / 8.0, 4 / 8.0, 5 / 8.0, 6 / 8.0, 1.0};
  const double recall[] = {0.25, 0.5, 0.75, 0.75, 1.0, 1.0};
  const double threshold[] = {0.15, 0.3, 0.5, 0.65, 0.8};
  for (std::size_t i = 0; i < curve.size(); ++i) {
    CAPTURE(i);
    CHECK(curve[i].share == doctest::Approx(share[i]));
    CHECK(curve[i].recall == doctest::Approx(recall[i]));
    if (i < 5) CHECK(curve[i].threshold == doctest::Approx(threshold[i]));
  }
  CHECK(curve[5].threshold > 0.9);  // above the highest score: every event escalated
  // Recall 0.9 needs every positive: below 0.8, 75 % of the events.
  const auto* p = cascadeForRecall(curve, 0.9);
  REQUIRE(p != nullptr);
  CHECK(p->threshold == doctest::Approx(0.8));
  CHECK(p->share == doctest::Approx(0.75));
  // Recall 0.75 is first reached below 0.5 (half the events), not below 0.65.
  CHECK(cascadeForRecall(curve, 0.75)->share == doctest::Approx(0.5));
  CHECK(cascadeCurve({}, {}).empty());
  // No positive: recall stays 0 and no threshold reaches a recall.
  CHECK(cascadeForRecall(cascadeCurve({0.1, 0.2}, b({0, 0})), 0.5) == nullptr);
}

TEST_CASE("assay report --cascade and --half on files") {
  const std::string dir = "/tmp/assay_report_cascade_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream j(dir + "/j.jsonl");
    std::ofstream e(dir + "/e.jsonl");
    const char* rows[][3] = {{"a", "0.9", "false"}, {"b", "0.2", "true"}, {"c", "0.1", "true"},
                             {"d", "0.6", "false"}, {"e", "0.4", "true"}, {"f", "0.2", "false"},
                             {"g", "0.7", "true"},  {"h", "0.9", "false"}};
    for (auto& r : rows) {
      j << R"({"id":")" << r[0]
        << R"(","verdicts":[{"judge":"claim_support","criterion":"faithfulness","score":)" << r[1]
        << R"(,"min":0,"max":1,"latency_ms":0.1}]})"
        << "\n";
      e << R"({"id":")" << r[0] << R"(","labels":{"hallucinated":)" << r[2] << "}}\n";
    }
  }
  ReportOptions o;
  o.judgments_path = dir + "/j.jsonl";
  o.events_path = dir + "/e.jsonl";
  o.cascade_judges = {"claim_support"};
  std::ostringstream out, err;
  CHECK(runReport(o, out, err) == 0);
  const std::string s = out.str();
  CAPTURE(s);
  // The same 8 scores as the curve test above.
  CHECK(s.find("all 4 positives (8 events)") != std::string::npos);
  CHECK(s.find("  0.5            0.500   0.750\n") != std::string::npos);
  CHECK(s.find("  0.8            0.750   1.000\n") != std::string::npos);
  CHECK(s.find("recall >= 0.9: below 0.8 sends 75.0 % of the events on (recall 1.000); "
               "assay estimate --escalation-share 0.750 prices it") != std::string::npos);
  CHECK(err.str().empty());  // claim_support is one of the default --auc judges, present here
  // --price-per-call: below 0.5 sends 4 of 8 events (EUR 0.04) and catches 3 of 4: 0.01333 each;
  // below 0.8 sends 6 (0.06) for all 4: 0.015; every event to the LLM: 0.08 / 4 = 0.02.
  o.price_per_call = 0.01;
  std::ostringstream priced;
  CHECK(runReport(o, priced, err) == 0);
  const std::string p = priced.str();
  CAPTURE(p);
  CHECK(p.find("  below      LLM share  recall  EUR per caught\n") != std::string::npos);
  CHECK(p.find("  0.5            0.500   0.750         0.01333\n") != std::string::npos);
  CHECK(p.find("  0.8            0.750   1.000         0.01500\n") != std::string::npos);
  CHECK(p.find("every event to the LLM judge costs EUR 0.02000 per hallucination caught") !=
        std::string::npos);
  CHECK(p.find("(recall 1.000), EUR 0.01500 per hallucination caught;") != std::string::npos);
  o.price_per_call.reset();
  // --half: XXH3_64 of the ids ("a".."h") puts b d f h in half A (below 2^63) and a c e g in
  // half B (computed with Python's xxhash.xxh3_64_intdigest).
  o.half = "A";
  std::ostringstream half_a;
  CHECK(runReport(o, half_a, err) == 0);
  CHECK(half_a.str().find("(positive 1 / negative 3;") != std::string::npos);
  o.half = "B";
  std::ostringstream half_b;
  CHECK(runReport(o, half_b, err) == 0);
  CHECK(half_b.str().find("(positive 3 / negative 1;") != std::string::npos);
  o.half.clear();
  // A positive at the top score: the threshold lies above it (1 + 0.5e-6) and is printed with
  // the digits that still include it ("below 1" would send nothing at 1.0: an operator trial
  // read "below 1 sends 100 %").
  {
    std::ofstream j(dir + "/j.jsonl");
    std::ofstream e(dir + "/e.jsonl");
    for (const auto& [id, score, label] : {std::tuple{"x", "1.0", "true"}, {"y", "0.5", "false"}}) {
      j << R"({"id":")" << id
        << R"(","verdicts":[{"judge":"claim_support","criterion":"faithfulness","score":)" << score
        << R"(,"min":0,"max":1,"latency_ms":0.1}]})"
        << "\n";
      e << R"({"id":")" << id << R"(","labels":{"hallucinated":)" << label << "}}\n";
    }
  }
  o.cascade_recall = 1;
  std::ostringstream top;
  CHECK(runReport(o, top, err) == 0);
  CHECK(top.str().find("recall >= 1: below 1.000001 sends 100.0 % of the events on (recall "
                       "1.000)") != std::string::npos);
  o.cascade_recall = 0.9;
  o.cascade_judges = {"nope"};
  std::ostringstream err2;
  CHECK(runReport(o, out, err2) == 2);
  CHECK(err2.str().find("--cascade nope: no scored verdict of that judge") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("assay report: each version of a judge on its own, the changed fields named") {
  // Issue 31: a rubric edit gives the judge a new judge_version; the report never mixes the two
  // versions' scores unless --across-versions asks for it.
  const std::string dir = "/tmp/assay_report_versions_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream j(dir + "/j.jsonl");
    for (int i = 0; i < 30; ++i) {
      const bool second = i >= 20;  // ten events after the edit
      const std::string version = second ? "bbbbbbbbbbbb" : "aaaaaaaaaaaa";
      const std::string fields = second ? R"({"type":"1111","model":"2222","rubric":"4444"})"
                                        : R"({"type":"1111","model":"2222","rubric":"3333"})";
      const int score = second ? 5 : 1 + i % 3;  // the new rubric gives the top score
      j << R"({"id":"e)" << i << R"(","judged_at":"2026-12-0)" << (second ? 5 : 4)
        << R"(T10:00:00.000Z","verdicts":[{"judge":"faith","criterion":"faithfulness","judge_version":")"
        << version << R"(","judge_version_fields":)" << fields << R"(,"score":)" << score
        << R"(,"min":1,"max":5,"latency_ms":1}]})"
        << "\n";
    }
  }
  ReportOptions o;
  o.judgments_path = dir + "/j.jsonl";
  std::ostringstream out, err;
  REQUIRE(runReport(o, out, err) == 0);
  const std::string text = out.str();
  CAPTURE(text);
  CHECK(text.find("versions: each version of a judge is summarised") != std::string::npos);
  CHECK(text.find("aaaaaaaaaaaa   runs    20, judged 2026-12-04T10:00:00.000Z") !=
        std::string::npos);
  CHECK(text.find("bbbbbbbbbbbb   runs    10") != std::string::npos);
  CHECK(text.find("against aaaaaaaaaaaa, changed: rubric") != std::string::npos);
  // Two summaries, each of its own version's scores only.
  CHECK(text.find("faith@aaaaaaaaaaaa faithfulness         runs   20: ok=20") != std::string::npos);
  CHECK(text.find("faith@bbbbbbbbbbbb faithfulness         runs   10: ok=10") != std::string::npos);
  CHECK(text.find("top-score share 100.0 %") != std::string::npos);  // the new version alone
  // Pooled on request: one summary of 30, the versions named.
  o.across_versions = true;
  std::ostringstream pooled;
  REQUIRE(runReport(o, pooled, err) == 0);
  const std::string p = pooled.str();
  CAPTURE(p);
  CHECK(p.find("versions: pooled by --across-versions") != std::string::npos);
  CHECK(p.find("2 versions: aaaaaaaaaaaa, bbbbbbbbbbbb") != std::string::npos);
  CHECK(p.find("faith              faithfulness         runs   30: ok=30") != std::string::npos);
  CHECK(p.find("faith@") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("assay report: verdicts written before judge versions go with the one version since") {
  // An upgrade: the file's first judgments have no judge_version; they are not a version of
  // their own (nothing tells them apart from the version written since).
  const std::string dir = "/tmp/assay_report_upgrade_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream j(dir + "/j.jsonl");
    for (int i = 0; i < 10; ++i)
      j << R"({"id":"u)" << i
        << R"(","judged_at":"2026-12-01T10:00:00.000Z","verdicts":[{"judge":"faith","criterion":"faithfulness","score":2,"min":1,"max":4}]})"
        << "\n";
    for (int i = 0; i < 5; ++i)
      j << R"({"id":"v)" << i
        << R"(","judged_at":"2026-12-05T10:00:00.000Z","verdicts":[{"judge":"faith","criterion":"faithfulness","judge_version":"aaaaaaaaaaaa","judge_version_fields":[1,2],"score":3,"min":1,"max":4}]})"
        << "\n";
  }
  ReportOptions o;
  o.judgments_path = dir + "/j.jsonl";
  std::ostringstream out, err;
  REQUIRE(runReport(o, out, err) == 0);
  const std::string text = out.str();
  CAPTURE(text);
  CHECK(text.find("faith              aaaaaaaaaaaa   10 verdicts written before judge versions "
                  "existed are counted with it") != std::string::npos);
  CHECK(text.find("faith              faithfulness         runs   15: ok=15") != std::string::npos);
  CHECK(text.find("faith@") == std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("assay report: hostile judge names and versions stay apart and print escaped") {
  // From the hostile trial: a name and version that joined to one key, NUL escapes that cut a
  // name, terminal escapes printed raw.
  const std::string dir = "/tmp/assay_report_hostile_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream j(dir + "/j.jsonl");
    const char* verdicts[] = {
        R"({"judge":"x\u001fy","judge_version":"z","criterion":"c","score":1,"min":0,"max":1})",
        R"({"judge":"x","judge_version":"y\u001fz","criterion":"c","score":0,"min":0,"max":1})",
        R"({"judge":"faith\u0000evil","criterion":"f","score":1,"min":0,"max":1})",
        R"({"judge":"esc\u001b[2J","criterion":"f","score":1,"min":0,"max":1})"};
    for (int i = 0; i < 4; ++i)
      j << R"({"id":"e)" << i << R"(","verdicts":[)" << verdicts[i] << "]}\n";
    // One judge twice in one judgment: counted once, the first kept.
    j << R"({"id":"twice","verdicts":[{"judge":"dup","score":1,"min":0,"max":1},)"
      << R"({"judge":"dup","score":0,"min":0,"max":1}]})"
      << "\n";
  }
  ReportOptions o;
  o.judgments_path = dir + "/j.jsonl";
  std::ostringstream out, err;
  REQUIRE(runReport(o, out, err) == 0);
  const std::string text = out.str();
  CAPTURE(text);
  CHECK(text.find("x\\x1fy") != std::string::npos);  // two judges, each its own summary
  CHECK(text.find("runs    1: ok=1") != std::string::npos);
  CHECK(text.find("faith\\x00evil") != std::string::npos);  // the whole name, escaped
  CHECK(text.find("esc\\x1b[2J") != std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);  // no raw escape reaches the terminal
  CHECK(text.find('\0') == std::string::npos);
  CHECK(text.find("(1 verdicts of a judge already in their judgment skipped: the first of each "
                  "kept)") != std::string::npos);
  // the first verdict (score 1) kept: one run, its mean 1
  const auto dup = text.find("\n  dup ");
  REQUIRE(dup != std::string::npos);
  const auto dup_end = text.find('\n', dup + 1);
  CHECK(text.substr(dup, dup_end - dup).find("runs    1: ok=1") != std::string::npos);
  CHECK(text.substr(dup_end, 60).find("mean 1.000") != std::string::npos);
  std::filesystem::remove_all(dir);
}
