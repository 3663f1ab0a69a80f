// `assay calibrate --judgments FILE --judge NAME` with human scores from events, feedback or a
// table (tests/cli/data/*_small.*). Golden values from scipy.stats / sklearn.metrics on the same
// items (spearmanr, kendalltau, cohen_kappa_score), written next to each check.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/calibrate.hpp"
#include "cli/cli.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {

const std::string kData = std::string(test::kTestDataDir) + "/cli/data/";

bool near(double a, double b) { return std::abs(a - b) <= 1e-9; }

CalibrationData load(const std::vector<std::string>& args) {
  return loadCalibrationInput(parseCalibrateArgs(args));
}

}  // namespace

TEST_CASE("judgments + events: a judge's scores against numbers at JSON Pointers, by id") {
  const auto d = load({"--judgments", kData + "judgments_small.jsonl", "--judge", "faith_llm",
                       "--events", kData + "events_small.jsonl", "--human", "/labels/faithfulness",
                       "--human", "/labels/expert"});
  CHECK(d.judgments_source == kData + "judgments_small.jsonl");
  CHECK(d.judge_criterion == "faithfulness");
  CHECK(d.judged == 7);      // e1..e7; e8's judgment has no faith_llm verdict
  CHECK(d.scored == 6);      // e6: no_context
  CHECK(d.not_judged == 2);  // events e8 and e9
  CHECK(d.min_score == 1);   // the judge's own scale, from its verdicts
  CHECK(d.max_score == 4);
  CHECK(d.rows_read == 8);
  CHECK(d.rows_used == 6);
  REQUIRE(d.skipped.size() == 2);
  CHECK(d.skipped[0].find("events_small.jsonl:4: not JSON") != std::string::npos);
  CHECK(d.skipped[1] == kData +
                            "events_small.jsonl:7: judge 'faith_llm' has no score for id 'e6' "
                            "(no_context)");
  REQUIRE(d.items.size() == 6);
  CHECK(d.items[1].key == "e2");
  CHECK(d.items[1].judge == 3);  // the last judgment of e2 (the first one said 1)
  CHECK(d.items[5].key == "e7");
  CHECK(d.items[5].humans.size() == 1);  // expert is null
  const auto r = computeCalibration(d);
  // judge [4,3,1,2,4,3] vs the mean human score [4,2.5,1,2,3.5,4]
  CHECK(near(r.per_item.spearman->coefficient, 0.8060599359358184));
  CHECK(near(r.per_item.spearman->p_value, 0.052771813251892584));
  CHECK(near(*r.per_item.kendall_tau_b, 0.7412493166611013));
  CHECK(near(r.per_annotation.spearman->coefficient, 0.8725490196078429));
  CHECK(r.judge_human.agreements == 8);
  CHECK(r.judge_human.n == 11);
  CHECK(near(*r.judge_human.kappa, 0.6292134831460674));
  CHECK(near(*r.annotator_kappa, 0.5));
  CHECK(r.verdicts == std::vector<std::string>{"rework the rubric"});

  // The default --human is /labels/CRITERION.
  const auto one = load({"--judgments", kData + "judgments_small.jsonl", "--judge", "faith_llm",
                         "--events", kData + "events_small.jsonl"});
  CHECK(one.human_columns == std::vector<std::string>{"/labels/faithfulness"});
  CHECK(computeCalibration(one).annotations == 6);
}

TEST_CASE("human labels on another scale than the judge's are an error saying how to map them") {
  // 0/1 hallucination-style labels against a 1..4 judge: every row labelled 0 was skipped as
  // outside the scale, silently (issue 29).
  const std::string events = "/tmp/assay_calibrate_binary_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream f(events);
    for (int i = 1; i <= 7; ++i)
      f << R"({"id":"e)" << i << R"(","question":"q","answer":"a","labels":{"faithfulness":)"
        << (i % 2) << "}}\n";
  }
  const std::vector<std::string> args = {
      "--judgments", kData + "judgments_small.jsonl", "--judge", "faith_llm", "--events", events};
  CHECK_THROWS_WITH_AS(load(args),
                       doctest::Contains("the human scores span 0..1, the judge's scale is 1..4"),
                       CalibrateError);
  CHECK_THROWS_WITH_AS(load(args), doctest::Contains("1 + (x - 0) x 3"), CalibrateError);
  // A scale given that holds both: no error, nothing skipped for its scale.
  auto both = args;
  both.insert(both.end(), {"--min-score", "0", "--max-score", "4"});
  const auto d = load(both);
  CHECK(d.rows_used == 6);  // e6 has no score (no_context)
  std::remove(events.c_str());
}

TEST_CASE("judgments + feedback: the annotations of the judge's criterion, long format") {
  const auto d = load({"--judgments", kData + "judgments_small.jsonl", "--judge", "faith_llm",
                       "--feedback", kData + "feedback_small.jsonl"});
  CHECK(d.long_format);
  CHECK(d.not_judged == 1);  // e8
  CHECK(d.rows_read == 12);  // 15 lines less a rating, another criterion and e8
  REQUIRE(d.input_notes.size() == 1);
  CHECK(d.input_notes[0] ==
        "2 feedback lines left out: ratings, or annotations of another criterion than "
        "faithfulness");
  REQUIRE(d.skipped.size() == 2);
  CHECK(d.skipped[0] == kData +
                            "feedback_small.jsonl:12: annotator 'ann' annotated id 'e1' again "
                            "(first on line 1; kept)");
  CHECK(d.skipped[1].find(":13: judge 'faith_llm' has no score for id 'e6'") != std::string::npos);
  const auto r = computeCalibration(d);
  CHECK(r.items == 6);
  CHECK(r.annotations == 10);
  CHECK(r.annotators == 2);
  CHECK(near(r.per_item.spearman->coefficient, 0.9710083124552246));
  CHECK(near(r.per_item.spearman->p_value, 0.0012485929031976688));
  CHECK(near(*r.per_item.kendall_tau_b, 0.9309493362512627));
  CHECK(r.first_second.n == 4);  // ann vs bob on e1, e2, e3, e5
  CHECK(near(*r.first_second.kappa, 0.07692307692307687));
}

TEST_CASE("judgments + a CSV table whose id column names the event") {
  const auto d = load({"--judgments", kData + "judgments_small.jsonl", "--judge", "faith_llm",
                       "--input", kData + "humans_small.csv"});
  CHECK(d.item_columns == std::vector<std::string>{"id"});
  CHECK(d.human_columns == std::vector<std::string>{"human_1", "human_2"});
  CHECK(d.not_judged == 2);  // e8, e9
  CHECK(d.rows_read == 7);
  CHECK(d.skipped.size() == 1);  // e6
  const auto r = computeCalibration(d);
  // The same scores as the events' faithfulness and expert labels: the same statistics.
  CHECK(near(r.per_item.spearman->coefficient, 0.8060599359358184));
  CHECK(near(*r.annotator_kappa, 0.5));
}

TEST_CASE("assay calibrate --judgments: output, exit codes and argument errors") {
  std::ostringstream out, err;
  CHECK(cli::runAssay({"calibrate", "--judgments", kData + "judgments_small.jsonl", "--judge",
                       "faith_llm", "--events", kData + "events_small.jsonl", "--human",
                       "/labels/faithfulness", "--human", "/labels/expert"},
                      out, err) == 0);
  const std::string s = out.str();
  CAPTURE(s);
  CHECK(s.find("assay calibrate: " + kData + "events_small.jsonl (JSON Lines, wide format)\n") !=
        std::string::npos);
  CHECK(s.find("  judge        faith_llm in " + kData +
               "judgments_small.jsonl (criterion faithfulness; version unversioned; 7 events "
               "judged, 6 scored; the last judgment of each id)\n") != std::string::npos);
  CHECK(s.find("  human        /labels/faithfulness, /labels/expert\n") != std::string::npos);
  CHECK(s.find("  scale        1..4\n") != std::string::npos);
  CHECK(s.find("  left out     2 rows of events the judge has no verdict for") !=
        std::string::npos);
  CHECK(s.find("Spearman rho        0.8061  (p = 0.0528)") != std::string::npos);
  CHECK(s.find("verdict: rework the rubric\n") != std::string::npos);
  CHECK(err.str().find("assay calibrate: skipped 2 of 8 rows\n") == 0);

  auto fails = [](const std::vector<std::string>& args, const std::string& message) {
    std::ostringstream o, e;
    std::vector<std::string> all = {"calibrate"};
    all.insert(all.end(), args.begin(), args.end());
    CHECK(cli::runAssay(all, o, e) == 2);
    CAPTURE(e.str());
    CHECK(e.str().find(message) != std::string::npos);
  };
  const std::string j = kData + "judgments_small.jsonl", ev = kData + "events_small.jsonl";
  fails({"--judgments", j, "--events", ev}, "--judgments needs --judge NAME");
  fails({"--judgments", j, "--judge", "faith_llm"},
        "--judgments takes the human scores from one of --events FILE, --feedback FILE or "
        "--input FILE");
  fails({"--judgments", j, "--judge", "x", "--events", ev, "--feedback", ev}, "one of --events");
  fails({"--events", ev}, "--events needs --judgments FILE");
  fails({"--judgments", j, "--judge", "faith_llm", "--events", ev, "--levels", "a,b"},
        "--levels does not apply with --judgments");
  fails({"--judgments", j, "--judge", "faith_llm", "--events", ev, "--annotator", "a"},
        "--annotator applies to --input only");
  fails({"--judgments", j, "--judge", "faith_llm", "--events", ev, "--human", "labels.x"},
        "--human 'labels.x' is not a JSON Pointer");
  fails({"--judgments", j, "--judge", "nope", "--events", ev},
        "judgments_small.jsonl: no verdict of judge 'nope' in 8 judgments (judges: "
        "context_overlap, faith_llm)");
  fails({"--judgments", ev, "--judge", "faith_llm", "--events", ev},
        "events_small.jsonl: holds no judgment (10 non-empty lines");
  fails({"--judgments", j, "--judge", "faith_llm", "--events", ev, "--min-score", "5"},
        "the scale 5..4 is empty (judge 'faith_llm' scores 1..4)");
}

TEST_CASE(
    "judgments of two versions of the judge: an error naming them, or one chosen, or pooled") {
  // Issue 31: a calibration is of one version of the judge.
  const std::string path = "/tmp/assay_calibrate_versions_" + std::to_string(::getpid());
  {
    std::ofstream f(path);
    for (int i = 1; i <= 7; ++i) {
      const bool second = i > 4;
      f << R"({"id":"e)" << i
        << R"(","verdicts":[{"judge":"faith_llm","criterion":"faithfulness","judge_version":")"
        << (second ? "bbbbbbbbbbbb" : "aaaaaaaaaaaa")
        << R"(","judge_version_fields":{"type":"1111","model":")" << (second ? "3333" : "2222")
        << R"("},"score":)" << (i % 4 + 1) << R"(,"min":1,"max":4}]})"
        << "\n";
    }
  }
  const std::vector<std::string> base = {"--judgments", path,       "--judge",
                                         "faith_llm",   "--events", kData + "events_small.jsonl"};
  CHECK_THROWS_WITH_AS(load(base),
                       (path + ": judge 'faith_llm' has verdicts of 2 versions: aaaaaaaaaaaa (4 "
                               "verdicts), bbbbbbbbbbbb (3 verdicts) (changed: model); a "
                               "calibration is of one version: choose one with --judge-version "
                               "VERSION, or pool them with --across-versions")
                           .c_str(),
                       CalibrateError);
  auto one = base;
  one.insert(one.end(), {"--judge-version", "bbbbbbbbbbbb"});
  const auto d = load(one);
  CHECK(d.judged == 3);  // e5..e7
  auto pooled = base;
  pooled.push_back("--across-versions");
  CHECK(load(pooled).judged == 7);
  auto unknown = base;
  unknown.insert(unknown.end(), {"--judge-version", "cccccccccccc"});
  CHECK_THROWS_WITH_AS(load(unknown),
                       doctest::Contains("no verdict of judge 'faith_llm' of version cccccccccccc"),
                       CalibrateError);
  std::remove(path.c_str());
}
