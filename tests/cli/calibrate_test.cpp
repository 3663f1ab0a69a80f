#include "cli/calibrate.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/test_paths.hpp"

using namespace assay;

namespace {

constexpr double kTol = 1e-9;

bool near(double a, double b) { return std::abs(a - b) <= kTol; }

CalibrationData parse(const std::string& text, const CalibrateOptions& o = {},
                      CalibrateFormat format = CalibrateFormat::kCsv) {
  return parseCalibrationInput(text, format, o, "f.csv");
}

std::string errorOf(const std::string& text, const CalibrateOptions& o = {},
                    CalibrateFormat format = CalibrateFormat::kCsv) {
  try {
    parse(text, o, format);
  } catch (const CalibrateError& e) {
    return e.what();
  }
  return "(no error)";
}

CalibrateOptions mtBenchOptions() {
  CalibrateOptions o;
  o.input_path = std::string(test::kSharedDataDir) + "/judge_human_pairs.csv";
  o.item_columns = {"question_id", "turn", "model_a", "model_b"};
  o.annotator_column = "human_judge";
  o.human_columns = {"human_winner"};
  o.judge_column = "llm_winner";
  o.levels = {"model_a", "tie", "model_b"};
  return o;
}

// Items whose annotators (human_1, human_2) agree with the judge, for the verdict tests.
CalibrationData agreeing(const std::vector<double>& judge) {
  CalibrationData d;
  d.human_columns = {"human_1", "human_2"};
  d.min_score = 1;
  d.max_score = 4;
  for (std::size_t i = 0; i < judge.size(); ++i)
    d.items.push_back(CalibrationItem{
        std::to_string(i), i + 2, judge[i], {{"human_1", judge[i]}, {"human_2", judge[i]}}});
  return d;
}

}  // namespace

TEST_CASE("CSV: quoted commas, doubled quotes, CRLF, line breaks in quotes, line numbers") {
  const auto r = parseCsv(
      "\xEF\xBB\xBF"
      "a,b,c\r\n"
      "1,\"x, y\",\"say \"\"hi\"\"\"\r\n"
      "\r\n"
      "2,\"two\r\nlines\",\r\n"
      "3,,\"\"\n"
      "4,\"a\"b,c\"d");
  REQUIRE(r.size() == 5);
  CHECK(r[0].line == 1);
  CHECK(r[0].fields == std::vector<std::string>{"a", "b", "c"});
  CHECK(r[1].line == 2);
  CHECK(r[1].fields == std::vector<std::string>{"1", "x, y", "say \"hi\""});
  CHECK(r[2].line == 4);  // the empty line 3 is skipped
  CHECK(r[2].fields == std::vector<std::string>{"2", "two\r\nlines", ""});
  CHECK(r[3].line == 6);
  CHECK(r[3].fields == std::vector<std::string>{"3", "", ""});
  CHECK(r[4].line == 7);  // no final line break; lenient like Python's csv
  CHECK(r[4].fields == std::vector<std::string>{"4", "ab", "c\"d"});

  CHECK(parseCsv("a\n\n").size() == 1);
  CHECK(parseCsv("").empty());
  CHECK_THROWS_WITH_AS(parseCsv("a,b\n1,\"open\n2,3\n"), "line 2: quoted field not closed",
                       CalibrateError);
}

TEST_CASE("wide format: columns, skipped rows, fatal errors") {
  const auto d = parse(
      "item,judge_score,human_a,human_b,note\n"
      "q1,4,4,3,\"fine, really\"\n"
      "q2,3,,2,\n"   // human_a did not rate q2
      "q3,2,x,2,\n"  // not a number: skipped
      "q4,,3,3,\n"   // no judge score: skipped
      "q5,1\n"       // too few fields: skipped
      "q6,2,,,\n"    // no human score: skipped
      "q7,1,1,2,\"a \"\"quoted\"\" note\"\n");
  CHECK_FALSE(d.long_format);
  CHECK(d.human_columns == std::vector<std::string>{"human_a", "human_b"});
  CHECK(d.rows_read == 7);
  CHECK(d.rows_used == 3);
  REQUIRE(d.items.size() == 3);
  CHECK(d.items[1].key == "q2");
  REQUIRE(d.items[1].humans.size() == 1);
  CHECK(d.items[1].humans[0].annotator == "human_b");
  CHECK(d.min_score == 1);
  CHECK(d.max_score == 4);
  REQUIRE(d.skipped.size() == 4);
  CHECK(d.skipped[0] == "f.csv:4: column 'human_a': 'x' is not a number");
  CHECK(d.skipped[1] == "f.csv:5: column 'judge_score' is empty");
  CHECK(d.skipped[2] == "f.csv:6: 2 fields, the header has 5");
  CHECK(d.skipped[3] == "f.csv:7: no human score (human_a, human_b empty)");

  // A missing column is fatal and names the header line.
  CHECK(errorOf("item,judge,human_1\nq1,3,3\n") ==
        "f.csv:1: no column 'judge_score' (the header has: item, judge, human_1)");
  CalibrateOptions o;
  o.human_columns = {"human_2"};
  CHECK(errorOf("item,judge_score,human_1\nq1,3,3\n", o) ==
        "f.csv:1: no column 'human_2' (the header has: item, judge_score, human_1)");
  CHECK(errorOf("item,judge_score,rater\nq1,3,3\n").find("no human score column") !=
        std::string::npos);
  CHECK(errorOf("item,judge_score,human_1\nq1,3,3\nq1,2,2\n")
            .rfind("f.csv:3: item 'q1' again (first on line 2)", 0) == 0);
  CHECK(errorOf("item,judge_score,human_1\nq1,x,3\n") ==
        "f.csv: no usable row (1 read, 1 skipped; first: f.csv:2: column 'judge_score': 'x' is "
        "not a number)");
  CHECK(errorOf("item,judge_score,human_1\n").rfind("f.csv: no usable row", 0) == 0);
  CHECK(errorOf("") == "f.csv: empty file (no header line)");

  // No item column: each row is an item. An explicit scale skips the rows outside it.
  CalibrateOptions scale;
  scale.min_score = 1;
  scale.max_score = 4;
  const auto rows = parse("judge_score,human\n4,4\n5,4\n1,1\n", scale);
  CHECK(rows.item_columns.empty());
  REQUIRE(rows.items.size() == 2);
  CHECK(rows.items[1].key == "line 4");
  CHECK(rows.skipped == std::vector<std::string>{"f.csv:3: column 'judge_score': 5 is outside "
                                                 "the scale 1..4"});
}

TEST_CASE("long format and levels: one row per (item, annotator), text mapped to 1..k") {
  CalibrateOptions o;
  o.item_columns = {"q", "turn"};
  o.annotator_column = "who";
  o.judge_column = "llm";
  o.levels = {"bad", "ok", "good"};
  const auto d = parse(
      "q,turn,who,human_label,llm\n"
      "1,1,zoe,good,good\n"
      "1,1,adam,ok,good\n"
      "1,2,adam,bad,ok\n"
      "2,1,adam,great,ok\n"  // not a level: skipped
      "2,1,,ok,ok\n",        // no annotator: skipped
      o);
  CHECK(d.long_format);
  CHECK(d.human_columns == std::vector<std::string>{"human_label"});  // the one human* column
  CHECK(d.min_score == 1);
  CHECK(d.max_score == 3);
  REQUIRE(d.items.size() == 2);
  CHECK(d.items[0].key == "1,1");
  CHECK(d.items[0].judge == 3);
  REQUIRE(d.items[0].humans.size() == 2);
  CHECK(d.items[0].humans[0].annotator == "adam");  // ordered by annotator name
  CHECK(d.items[0].humans[0].score == 2);
  CHECK(d.items[0].humans[1].annotator == "zoe");
  CHECK(d.items[0].humans[1].score == 3);
  CHECK(d.items[1].judge == 2);
  CHECK(d.skipped == std::vector<std::string>{
                         "f.csv:5: column 'human_label': 'great' is not one of the levels (bad, "
                         "ok, good)",
                         "f.csv:6: column 'who' is empty"});

  // The judge's score must be the same on every row of an item; an annotator rates it once.
  CHECK(errorOf("q,turn,who,human_label,llm\n1,1,a,ok,good\n1,1,b,ok,bad\n", o) ==
        "f.csv:3: item '1,1' has judge score 'bad' here but 'good' on line 2 (column 'llm'); the "
        "item columns (q, turn) do not name one item, or the judge's scores differ");
  CHECK(errorOf("q,turn,who,human_label,llm\n1,1,a,ok,good\n1,1,a,bad,good\n", o)
            .rfind("f.csv:3: annotator 'a' rated item '1,1' again (first on line 2)", 0) == 0);
  CalibrateOptions two = o;
  two.human_columns = {};
  CHECK(errorOf("q,turn,who,human_x,human_y,llm\n1,1,a,ok,ok,good\n", two)
            .find("takes one human score column, not 2 (human_x, human_y)") != std::string::npos);
}

TEST_CASE("JSON Lines: keys as columns, numbers or strings, the same result as CSV") {
  const std::string csv =
      "item,judge_score,human_1,human_2\n"
      "a,4,4,3\nb,3,3,3\nc,2,2,1\nd,1,1,1\ne,3,4,3\nf,2,3,2\n";
  const std::string jsonl =
      "{\"item\":\"a\",\"judge_score\":4,\"human_1\":4,\"human_2\":3}\n"
      "{\"item\":\"b\",\"judge_score\":3,\"human_1\":\"3\",\"human_2\":3}\r\n"
      "\n"
      "{\"item\":\"c\",\"judge_score\":2.0,\"human_1\":2,\"human_2\":1,\"extra\":[1]}\n"
      "{\"item\":\"d\",\"judge_score\":1,\"human_1\":1,\"human_2\":1}\n"
      "{\"item\":\"e\",\"judge_score\":3,\"human_1\":4,\"human_2\":3}\n"
      "{\"item\":\"f\",\"judge_score\":2,\"human_1\":3,\"human_2\":2}\n"
      "{\"item\":\"g\",\"judge_score\":null,\"human_1\":3}\n"
      "{\"item\":\"h\",\"judge_score\":{},\"human_1\":3}\n"
      "not json\n"
      "[1,2]\n";
  const auto a = parse(csv);
  const auto b = parse(jsonl, {}, CalibrateFormat::kJsonl);
  CHECK(b.rows_read == 10);
  CHECK(b.rows_used == 6);
  REQUIRE(b.skipped.size() == 4);
  CHECK(b.skipped[0] == "f.csv:8: column 'judge_score' is empty");
  CHECK(b.skipped[1] == "f.csv:9: column 'judge_score': an object or array, not a score");
  CHECK(b.skipped[2].rfind("f.csv:10: not JSON (", 0) == 0);
  CHECK(b.skipped[3] == "f.csv:11: not a JSON object");
  const auto ra = computeCalibration(a);
  const auto rb = computeCalibration(b);
  REQUIRE(ra.per_item.spearman);
  REQUIRE(rb.per_item.spearman);
  CHECK(ra.per_item.spearman->coefficient == rb.per_item.spearman->coefficient);
  CHECK(ra.per_item.spearman->p_value == rb.per_item.spearman->p_value);
  CHECK(*ra.per_annotation.kendall_tau_b == *rb.per_annotation.kendall_tau_b);
  CHECK(*ra.annotator_kappa == *rb.annotator_kappa);
  CHECK(ra.judge_human.agreements == rb.judge_human.agreements);

  CalibrateOptions o;
  o.judge_column = "score";
  CHECK(errorOf("{\"item\":\"a\",\"human\":1}\n", o, CalibrateFormat::kJsonl) ==
        "f.csv: no object has the key 'score' (keys: item, human)");
}

TEST_CASE("the hand-made wide file: golden values (tests/golden/calibrate_golden.py)") {
  CalibrateOptions o;
  o.input_path = std::string(test::kTestDataDir) + "/cli/data/calibrate_wide.csv";
  o.min_score = 1;
  o.max_score = 4;
  const auto d = loadCalibrationInput(o);
  CHECK(d.rows_read == 21);
  CHECK(d.rows_used == 17);
  CHECK(d.skipped.size() == 4);
  CalibrationThresholds t;
  t.min_samples = 10;
  const auto r = computeCalibration(d, t);
  CHECK(r.items == 17);
  CHECK(r.annotations == 40);
  CHECK(r.multi_annotated == 16);
  CHECK(r.annotators == 3);
  REQUIRE(r.per_item.spearman);
  CHECK(near(r.per_item.spearman->coefficient, 0.9109515654950827));
  CHECK(near(r.per_item.spearman->p_value, 3.7465302736375767e-07));
  CHECK(near(*r.per_item.kendall_tau_b, 0.824163383692134));
  REQUIRE(r.per_annotation.spearman);
  CHECK(near(r.per_annotation.spearman->coefficient, 0.8418630241563548));
  CHECK(near(r.per_annotation.spearman->p_value, 1.0025724499968138e-11));
  CHECK(near(*r.per_annotation.kendall_tau_b, 0.7592689428857353));
  CHECK(r.judge_human.agreements == 24);
  CHECK(r.judge_human.n == 40);
  CHECK(near(*r.judge_human.kappa, 0.4639865996649917));
  CHECK(near(*r.judge_human.quadratic, 0.8309561542525092));
  REQUIRE(r.pairs.size() == 3);
  const struct {
    const char *a, *b;
    std::size_t n, agree;
    double kappa, quadratic;
  } pairs[] = {{"human_1", "human_2", 16, 7, 0.24607329842931935, 0.7482517482517482},
               {"human_1", "human_3", 7, 5, 0.6216216216216216, 0.8727272727272727},
               {"human_2", "human_3", 7, 2, 0.054054054054053835, 0.7107438016528925}};
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(r.pairs[i].a == pairs[i].a);
    CHECK(r.pairs[i].b == pairs[i].b);
    CHECK(r.pairs[i].kappa.n == pairs[i].n);
    CHECK(r.pairs[i].kappa.agreements == pairs[i].agree);
    CHECK(near(*r.pairs[i].kappa.kappa, pairs[i].kappa));
    CHECK(near(*r.pairs[i].kappa.quadratic, pairs[i].quadratic));
  }
  CHECK(near(*r.annotator_kappa, 0.30724965803499826));  // Light's kappa
  using Counts = std::vector<std::pair<double, std::size_t>>;
  CHECK(r.judge.counts == Counts{{1, 3}, {2, 4}, {3, 4}, {4, 6}});
  CHECK(r.humans.counts == Counts{{1, 8}, {2, 11}, {3, 11}, {4, 10}});
  REQUIRE(r.judge.summary);
  REQUIRE(r.humans.summary);
  CHECK(near(r.judge.summary->mean, 2.764705882352941));
  CHECK(near(r.judge.summary->top_share, 0.35294117647058826));
  CHECK(near(r.judge.summary->bottom_share, 0.17647058823529413));
  CHECK(near(r.judge.summary->entropy, 0.97712369984604));
  CHECK(near(r.humans.summary->mean, 2.575));
  CHECK(near(r.humans.summary->top_share, 0.25));
  CHECK(near(r.humans.summary->bottom_share, 0.2));
  CHECK(near(r.humans.summary->entropy, 0.9943793404575041));
  CHECK(r.verdicts == std::vector<std::string>{"rework the rubric"});
  REQUIRE(r.reasons.size() == 1);
  CHECK(r.reasons[0].find("annotator kappa 0.307 < 0.60") != std::string::npos);
  CHECK(r.notes.empty());
}

TEST_CASE("MT-Bench judge_human_pairs.csv: golden values, 67.3 % agreement as in the README") {
  const auto d = loadCalibrationInput(mtBenchOptions());
  CHECK(d.rows_read == 1751);
  CHECK(d.rows_used == 1751);
  CHECK(d.skipped.empty());
  const auto r = computeCalibration(d);
  CHECK(r.items == 1232);
  CHECK(r.annotations == 1751);
  CHECK(r.multi_annotated == 407);
  CHECK(r.annotators == 65);
  REQUIRE(r.per_item.spearman);
  CHECK(near(r.per_item.spearman->coefficient, 0.45839542584888665));
  CHECK(near(r.per_item.spearman->p_value, 4.923549277946377e-65));
  CHECK(near(*r.per_item.kendall_tau_b, 0.4255410210258162));
  REQUIRE(r.per_annotation.spearman);
  CHECK(near(r.per_annotation.spearman->coefficient, 0.4354532611323976));
  CHECK(near(r.per_annotation.spearman->p_value, 6.151525514008989e-82));
  CHECK(near(*r.per_annotation.kendall_tau_b, 0.41340755162880954));
  CHECK(r.judge_human.agreements == 1179);
  CHECK(r.judge_human.n == 1751);
  CHECK(std::round(1000.0 * 1179 / 1751) / 10 == 67.3);
  CHECK(near(*r.judge_human.kappa, 0.3907375651571954));
  CHECK(near(*r.judge_human.quadratic, 0.41912246316816226));
  CHECK(r.first_second.n == 407);
  CHECK(r.first_second.agreements == 282);
  CHECK(near(*r.first_second.kappa, 0.4556727724043482));
  CHECK(near(*r.first_second.quadratic, 0.4820957208509923));
  CHECK(near(*r.annotator_kappa, 0.4556727724043482));
  CHECK(r.pairs.empty());  // no annotator pair shares 20 items
  REQUIRE(r.most_shared);
  CHECK(r.most_shared->a == "author_4");
  CHECK(r.most_shared->b == "expert_24");
  CHECK(r.most_shared->kappa.n == 16);
  using Counts = std::vector<std::pair<double, std::size_t>>;
  CHECK(r.judge.counts == Counts{{1, 107}, {2, 302}, {3, 823}});
  CHECK(r.humans.counts == Counts{{1, 294}, {2, 417}, {3, 1040}});
  CHECK(near(r.judge.summary->mean, 2.581168831168831));
  CHECK(near(r.judge.summary->top_share, 0.6680194805194806));
  CHECK(near(r.judge.summary->bottom_share, 0.08685064935064934));
  CHECK(near(r.judge.summary->entropy, 0.7521981930825941));
  CHECK(near(r.humans.summary->mean, 2.4260422615648203));
  CHECK(near(r.humans.summary->top_share, 0.5939463163906339));
  CHECK(near(r.humans.summary->bottom_share, 0.16790405482581383));
  CHECK(near(r.humans.summary->entropy, 0.8653992027094463));
  CHECK_FALSE(r.judge.summary->lenient);
  CHECK(r.verdicts == std::vector<std::string>{"rework the rubric"});
  CHECK(r.reasons ==
        std::vector<std::string>{"rework the rubric: annotator kappa 0.456 < 0.60; the humans "
                                 "themselves disagree, so the rubric is ambiguous",
                                 "rework the rubric: judge-human Spearman 0.458 < 0.50"});

  // The key without `turn` pairs rows of different turns: refused, naming the line.
  auto o = mtBenchOptions();
  o.item_columns = {"question_id", "model_a", "model_b"};
  CHECK_THROWS_AS(loadCalibrationInput(o), CalibrateError);
}

TEST_CASE("verdicts: usable, too lenient, insufficient data; undefined statistics in words") {
  CalibrationThresholds t;
  t.min_samples = 10;
  const auto usable = computeCalibration(agreeing({1, 2, 3, 4, 1, 2, 3, 4, 2, 3, 1, 4}), t);
  CHECK(usable.verdicts == std::vector<std::string>{"usable"});
  REQUIRE(usable.reasons.size() == 1);
  CHECK(usable.reasons[0].rfind("usable: judge-human Spearman 1.000 >= 0.50", 0) == 0);

  const auto lenient = computeCalibration(agreeing({4, 4, 4, 4, 4, 4, 4, 4, 4, 1}), t);
  CHECK(lenient.verdicts == std::vector<std::string>{"too lenient"});
  CHECK(lenient.reasons[0] ==
        "too lenient: the judge gave the top score (4) to 90.0 % of the items, more than 80.0 %");
  // Below min_samples the leniency rule is not applied, and the note says so.
  const auto few = computeCalibration(agreeing({4, 4, 4, 4, 4, 4, 4, 4, 4, 1}));
  CHECK(few.verdicts == std::vector<std::string>{"usable"});
  CHECK(few.notes ==
        std::vector<std::string>{"leniency not assessed: 10 items, fewer than --min-samples 100"});

  // A constant judge: correlations undefined, never 0 or NaN; both rules fire.
  auto constant = agreeing({4, 4, 4, 4, 4, 4, 4, 4, 4, 4});
  constant.items[0].humans[0].score = constant.items[0].humans[1].score = 3;
  const auto c = computeCalibration(constant, t);
  CHECK_FALSE(c.per_item.spearman);
  CHECK(c.per_item.spearman_undefined == "the judge gave one score only");
  CHECK_FALSE(c.per_item.kendall_tau_b);
  CHECK(c.verdicts == std::vector<std::string>{"too lenient", "insufficient data"});
  std::ostringstream out;
  printCalibration(constant, c, t, out);
  CHECK(out.str().find("Spearman rho        undefined (the judge gave one score only)") !=
        std::string::npos);
  CHECK(out.str().find(" nan") == std::string::npos);
  CHECK(out.str().find("-nan") == std::string::npos);
  CHECK(out.str().find("verdict: too lenient, insufficient data") != std::string::npos);

  // Two items, one human column: too few items, no annotator pair.
  auto tiny = agreeing({1, 4});
  tiny.human_columns = {"human_1"};
  for (auto& item : tiny.items) item.humans.pop_back();
  const auto s = computeCalibration(tiny, t);
  CHECK(s.per_item.spearman_undefined == "2 items, fewer than 3");
  CHECK(s.per_item.kendall_tau_b);
  CHECK(s.annotator_kappa_undefined == "one human column only");
  CHECK(s.verdicts == std::vector<std::string>{"insufficient data"});
  CHECK(s.notes.back() ==
        "annotator agreement not assessed: kappa undefined (one human column "
        "only)");
}

TEST_CASE("assay calibrate: arguments, output and exit codes") {
  CHECK_THROWS_WITH_AS(parseCalibrateArgs({}),
                       "--input FILE is required (or --judgments FILE --judge NAME)",
                       CalibrateError);
  CHECK_THROWS_WITH_AS(parseCalibrateArgs({"--input", "x", "--bogus", "1"}),
                       "unknown argument '--bogus'", CalibrateError);
  CHECK_THROWS_WITH_AS(parseCalibrateArgs({"--input"}), "--input needs a value", CalibrateError);
  CHECK_THROWS_WITH_AS(parseCalibrateArgs({"--input", "x", "--format", "xml"}),
                       "--format 'xml': expected csv or jsonl", CalibrateError);
  CHECK_THROWS_AS(parseCalibrateArgs({"--input", "x", "--levels", "a,a"}), CalibrateError);
  CHECK_THROWS_AS(parseCalibrateArgs({"--input", "x", "--levels", "a,b", "--max-score", "3"}),
                  CalibrateError);
  CHECK_THROWS_AS(parseCalibrateArgs({"--input", "x", "--leniency-max-ratio", "1.5"}),
                  CalibrateError);
  CHECK_THROWS_AS(parseCalibrateArgs({"--input", "x", "--min-score", "4", "--max-score", "1"}),
                  CalibrateError);
  const auto o = parseCalibrateArgs({"--input", "f.csv", "--item", "a,b", "--human", "h1",
                                     "--human", "h2", "--leniency-max-ratio", "0.7",
                                     "--min-samples", "30", "--format", "jsonl"});
  CHECK(o.item_columns == std::vector<std::string>{"a", "b"});
  CHECK(o.human_columns == std::vector<std::string>{"h1", "h2"});
  CHECK(o.judge_column == "judge_score");
  CHECK(o.leniency_max_ratio == 0.7);
  CHECK(o.min_samples == 30);
  CHECK(o.format == CalibrateFormat::kJsonl);

  std::ostringstream out, err;
  CalibrateOptions missing;
  missing.input_path = "/nonexistent/calibration.csv";
  CHECK(runCalibrate(missing, out, err) == 2);
  CHECK(err.str() ==
        "assay calibrate: cannot read '/nonexistent/calibration.csv' (not a readable file)\n");

  const std::string dir = "/tmp/assay_calibrate_test_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/bad.csv");
    f << "item,judge_score,human_1\n";
    for (int i = 0; i < 7; ++i) f << "q" << i << ",x,1\n";
  }
  CalibrateOptions bad;
  bad.input_path = dir + "/bad.csv";
  err.str("");
  CHECK(runCalibrate(bad, out, err) == 2);
  CHECK(err.str().find("no usable row (7 read, 7 skipped; first: " + dir +
                       "/bad.csv:2: column 'judge_score': 'x' is not a number)") !=
        std::string::npos);

  std::ostringstream mt_out, mt_err;
  CHECK(runCalibrate(mtBenchOptions(), mt_out, mt_err) == 0);
  CHECK(mt_err.str().empty());
  const std::string text = mt_out.str();
  CHECK(text.find("exact agreement     67.3 % (1179 of 1751)") != std::string::npos);
  CHECK(text.find("Spearman rho        0.4584  (p = 4.92e-65)") != std::string::npos);
  CHECK(text.find("verdict: rework the rubric\n") != std::string::npos);

  {
    std::ofstream f(dir + "/scores.jsonl");
    f << "{\"item\":\"a\",\"judge_score\":4,\"human\":4}\n"
      << "{\"item\":\"b\",\"judge_score\":1,\"human\":2}\n"
      << "{\"item\":\"c\",\"judge_score\":3,\"human\":\"?\"}\n"
      << "{\"item\":\"d\",\"judge_score\":2,\"human\":2}\n";
  }
  CalibrateOptions jl;
  jl.input_path = dir + "/scores.jsonl";  // the format from the extension
  std::ostringstream jl_out, jl_err;
  CHECK(runCalibrate(jl, jl_out, jl_err) == 0);
  CHECK(jl_out.str().find("(JSON Lines, wide format)") != std::string::npos);
  CHECK(jl_err.str() == "assay calibrate: skipped 1 of 4 rows\n  " + dir +
                            "/scores.jsonl:3: column 'human': '?' is not a number\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("long format: annotator pairs sharing enough items, most shared first") {
  // Items 0-5 scored by ann and bob, items 0-2 also by cy; ann and bob agree, cy does not.
  CalibrationData d;
  d.long_format = true;
  d.human_columns = {"h"};
  d.min_score = 1;
  d.max_score = 3;
  const double judge[] = {1, 2, 3, 1, 2, 3};
  for (std::size_t i = 0; i < 6; ++i) {
    CalibrationItem item{
        std::to_string(i), i + 2, judge[i], {{"ann", judge[i]}, {"bob", judge[i]}}};
    if (i < 3) item.humans.push_back({"cy", 4 - judge[i]});
    d.items.push_back(item);
  }
  CalibrationThresholds t;
  t.min_pair_items = 3;
  const auto r = computeCalibration(d, t);
  CHECK(r.annotators == 3);
  REQUIRE(r.pairs.size() == 3);
  CHECK(r.pairs[0].a == "ann");
  CHECK(r.pairs[0].b == "bob");
  CHECK(r.pairs[0].kappa.n == 6);
  CHECK(*r.pairs[0].kappa.kappa == doctest::Approx(1.0));
  CHECK(r.pairs[1].a == "ann");
  CHECK(r.pairs[1].b == "cy");
  CHECK(r.pairs[1].kappa.n == 3);
  CHECK(r.pairs[2].a == "bob");
  CHECK(r.pairs[2].kappa.agreements == 1);  // the middle score only
  REQUIRE(r.most_shared);
  CHECK(r.most_shared->b == "bob");
  CHECK(r.first_second.n == 6);  // ann vs bob on every item
  CHECK(*r.annotator_kappa == doctest::Approx(1.0));
  std::ostringstream out;
  printCalibration(d, r, t, out);
  CHECK(out.str().find("annotator pairs sharing at least 3 items: 3\n    ann vs bob: n = 6, "
                       "kappa 1.0000") != std::string::npos);
}

TEST_CASE("distributions: many distinct values on a continuous scale are counted in tenths") {
  CalibrationData d;
  d.human_columns = {"human"};
  d.min_score = 0;
  d.max_score = 1;
  for (int i = 0; i < 20; ++i)  // judge 0.00, 0.05, … 0.95; human 1 − judge
    d.items.push_back(CalibrationItem{
        std::to_string(i), std::size_t(i) + 2, i / 20.0, {{"human", 1 - i / 20.0}}});
  const auto r = computeCalibration(d);
  CHECK(r.judge.bin_width == doctest::Approx(0.1));
  REQUIRE(r.judge.counts.size() == 10);
  CHECK(r.judge.counts[0].first == 0);
  CHECK(r.judge.counts[0].second == 2);   // 0.00, 0.05
  CHECK(r.judge.counts[7].second == 2);   // 0.70, 0.75 (0.7 / 0.1 would be 6.999…)
  CHECK(r.humans.counts[9].second == 3);  // 0.90, 0.95, 1.00: the last tenth has the maximum
  std::ostringstream out;
  printCalibration(d, r, {}, out);
  CHECK(out.str().find("\n  [0, 0.1)   ") != std::string::npos);
  CHECK(out.str().find("\n  [0.9, 1]   ") != std::string::npos);
  // Few values: one row per value, as before.
  d.items.resize(5);
  CHECK(computeCalibration(d).judge.bin_width == 0);
}
