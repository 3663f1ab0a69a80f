#include "tracking/tracker.hpp"

#include <doctest/doctest.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/rfc3339.hpp"
#include "tests/metric_value.hpp"
#include "tracking/stats.hpp"

using namespace assay;

namespace {
std::string text(prometheus::Registry& r) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, r.Collect());
  return out.str();
}

std::optional<double> value(prometheus::Registry& r, const std::string& name,
                            const std::map<std::string, std::string>& labels) {
  return test::metricValue(r, name, labels);
}

/// The issue's vectors have ten pairs: below the default tracking.min_pairs (30).
TrackingOptions tenPairs() {
  TrackingOptions o;
  o.min_pairs = 10;
  return o;
}

const std::map<std::string, std::string> kFaith = {{"judge", "faith_llm"},
                                                   {"criterion", "faithfulness"}};
// The issue's vectors: judge vs human → rho 0.7647, tau-b 0.6944, kappa 0.4444 / 0.7917.
const std::vector<int> kJudge = {4, 2, 3, 4, 1, 3, 2, 4, 3, 2};
const std::vector<int> kHuman = {4, 2, 4, 3, 1, 3, 3, 4, 2, 2};
}  // namespace

TEST_CASE("leniency and drift gauges appear once defined, with the right values") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.window = 500;
  o.min_samples = 100;
  o.baseline_window = 100;
  o.recent_window = 50;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}, {"overlap", "faithfulness", 0, 1}}, o, reg);
  t.refresh();
  CHECK_FALSE(value(reg, "assay_judge_max_score_ratio", {}));  // nothing yet

  for (int i = 0; i < 99; ++i) t.record(0, "e" + std::to_string(i), "", 4);
  t.refresh();
  CHECK(value(reg, "assay_judge_max_score_ratio", kFaith) == 1.0);
  CHECK_FALSE(value(reg, "assay_judge_lenient", kFaith));  // 99 < min_samples
  t.record(0, "x", "", 7.5e30);                            // rejected, not counted
  t.record(0, "y", "", 4);
  t.refresh();
  CHECK(value(reg, "assay_judge_lenient", kFaith) == 1.0);
  CHECK(value(reg, "assay_judge_window_size", kFaith) == 100.0);
  CHECK_FALSE(value(reg, "assay_score_drift", kFaith));  // recent window not full
  for (int i = 0; i < 50; ++i) t.record(0, "d" + std::to_string(i), "", i % 2 ? 2 : 1);
  t.refresh();
  CHECK(value(reg, "assay_score_drift", kFaith) == 1.0);
  CHECK(value(reg, "assay_score_baseline_mean", kFaith) == 4.0);
  CHECK(value(reg, "assay_score_recent_mean", kFaith) == 1.5);
  CHECK(*value(reg, "assay_score_drift_p_value", kFaith) < 1e-10);
  CHECK_FALSE(value(reg, "assay_judge_max_score_ratio", {{"judge", "overlap"}}));  // absent
  CHECK(text(reg).find("NaN") == std::string::npos);
}

TEST_CASE(
    "scores 2, 3, 4 and a rejected 7.5e30: mean 3.0 over 3; bottom share, distinct, entropy") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, TrackingOptions{}, reg);
  t.record(0, "a", "", 2);
  t.record(0, "b", "", 3);
  t.record(0, "c", "", 4);
  t.record(0, "d", "", 7.5e30);
  t.record(0, "e", "", std::nan(""));
  t.refresh();
  CHECK(value(reg, "assay_score_window_mean", kFaith) == doctest::Approx(3.0));
  CHECK(value(reg, "assay_judge_window_size", kFaith) == 3.0);
  CHECK(value(reg, "assay_judge_scores_rejected_total", {{"judge", "faith_llm"}}) == 2.0);
  CHECK(value(reg, "assay_judge_min_score_ratio", kFaith) == 0.0);
  CHECK(value(reg, "assay_judge_distinct_scores", kFaith) == 3.0);
  // Three of four levels once each: entropy log(3) / log(4).
  CHECK(value(reg, "assay_judge_score_entropy", kFaith) ==
        doctest::Approx(std::log(3.0) / std::log(4.0)));
}

TEST_CASE("500 verdicts with 85 % at the top score are lenient, 75 % are not") {
  for (const auto& [top, lenient] : {std::pair{425, 1.0}, std::pair{375, 0.0}}) {
    prometheus::Registry reg;
    ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, TrackingOptions{}, reg);
    for (int i = 0; i < 500; ++i) t.record(0, std::to_string(i), "", i < top ? 4 : 3);
    t.refresh();
    CHECK(value(reg, "assay_judge_lenient", kFaith) == lenient);
    CHECK(value(reg, "assay_judge_max_score_ratio", kFaith) == doctest::Approx(top / 500.0));
  }
}

TEST_CASE("a custom criterion on 0-3: leniency at its top level, drift and entropy on its scale") {
  // The scale a custom rubric's levels give (LlmJudge::info: min 0, max 3).
  const std::map<std::string, std::string> charter = {{"judge", "charter_llm"},
                                                      {"criterion", "response_charter"}};
  TrackingOptions o;
  o.baseline_window = 200;
  o.recent_window = 100;
  for (const auto& [top, lenient] : {std::pair{425, 1.0}, std::pair{375, 0.0}}) {
    prometheus::Registry reg;
    ScoreTracker t({{"charter_llm", "response_charter", 0, 3}}, o, reg);
    for (int i = 0; i < 500; ++i) t.record(0, std::to_string(i), "", i < top ? 3 : 2);
    t.refresh();
    CHECK(value(reg, "assay_judge_lenient", charter) == lenient);
    CHECK(value(reg, "assay_judge_max_score_ratio", charter) == doctest::Approx(top / 500.0));
    CHECK(value(reg, "assay_judge_min_score_ratio", charter) == 0.0);  // nothing at 0
  }
  // A 0 is a score (the bottom level), not a missing one; two of four levels used.
  prometheus::Registry reg;
  ScoreTracker t({{"charter_llm", "response_charter", 0, 3}}, o, reg);
  for (int i = 0; i < 200; ++i) t.record(0, "b" + std::to_string(i), "", 3);
  for (int i = 0; i < 100; ++i) t.record(0, "r" + std::to_string(i), "", 0);
  t.refresh();
  CHECK(value(reg, "assay_judge_min_score_ratio", charter) == doctest::Approx(100.0 / 300));
  CHECK(value(reg, "assay_judge_distinct_scores", charter) == 2.0);
  CHECK(value(reg, "assay_score_recent_mean", charter) == 0.0);
  CHECK(value(reg, "assay_score_drift", charter) == 1.0);
  CHECK(value(reg, "assay_judge_score_entropy", charter) ==
        doctest::Approx((-(2.0 / 3) * std::log(2.0 / 3) - (1.0 / 3) * std::log(1.0 / 3)) /
                        std::log(4.0)));
}

TEST_CASE("the window's time bound drops old scores and their series") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.window_seconds = 60;
  double now = 1000;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg, [&] { return now; });
  t.record(0, "a", "A", 4);
  t.record(0, "b", "A", 2);
  now = 1030;
  t.record(0, "c", "A", 3);
  t.refresh();
  CHECK(value(reg, "assay_judge_window_size", kFaith) == 3.0);
  now = 1061;  // a and b are older than 60 s
  t.refresh();
  CHECK(value(reg, "assay_judge_window_size", kFaith) == 1.0);
  CHECK(value(reg, "assay_score_window_mean", kFaith) == 3.0);
  CHECK(value(reg, "assay_score_mean", {{"variant", "A"}}) == 3.0);  // n = 1: a mean…
  CHECK(value(reg, "assay_score_n", {{"variant", "A"}}) == 1.0);
  CHECK_FALSE(value(reg, "assay_score_ci95_low", {{"variant", "A"}}));  // …and no interval
  CHECK_FALSE(value(reg, "assay_score_sd", {{"variant", "A"}}));
  now = 1100;
  t.refresh();
  CHECK_FALSE(value(reg, "assay_judge_window_size", kFaith));
  CHECK_FALSE(value(reg, "assay_score_window_mean", kFaith));
}

TEST_CASE("variants: mean, sd, n and the 95 % interval (Student's t below 30), and overlap") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.min_interval_n = 3;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg);
  const std::vector<double> a = {3, 4, 4, 2, 3, 4, 3, 3}, b = {1, 2, 2, 3, 1, 2}, c = {3, 2, 3};
  int id = 0;
  for (double x : a) t.record(0, std::to_string(id++), "A", x);
  for (double x : b) t.record(0, std::to_string(id++), "B", x);
  for (double x : c) t.record(0, std::to_string(id++), "C", x);
  t.refresh();
  const auto va = [&](const char* name, const char* v) {
    return value(reg, name, {{"judge", "faith_llm"}, {"variant", v}});
  };
  // scipy: mean ± t.ppf(0.975, n-1)·sd/√n
  CHECK(va("assay_score_mean", "A") == doctest::Approx(3.25).epsilon(1e-12));
  CHECK(va("assay_score_sd", "A") == doctest::Approx(0.7071067811865476).epsilon(1e-12));
  CHECK(va("assay_score_n", "A") == 8.0);
  CHECK(va("assay_score_ci95_low", "A") == doctest::Approx(2.658843937247425).epsilon(1e-9));
  CHECK(va("assay_score_ci95_high", "A") == doctest::Approx(3.841156062752575).epsilon(1e-9));
  CHECK(va("assay_score_ci95_low", "B") == doctest::Approx(1.0433468825406935).epsilon(1e-9));
  CHECK(va("assay_score_ci95_high", "B") == doctest::Approx(2.623319784125973).epsilon(1e-9));
  // A [2.66, 3.84] and B [1.04, 2.62] do not overlap; C overlaps both.
  CHECK(value(reg, "assay_score_ci95_overlap", {{"variant_a", "A"}, {"variant_b", "B"}}) == 0.0);
  CHECK(value(reg, "assay_score_ci95_overlap", {{"variant_a", "A"}, {"variant_b", "C"}}) == 1.0);
  CHECK(value(reg, "assay_score_ci95_overlap", {{"variant_a", "B"}, {"variant_b", "C"}}) == 1.0);
}

TEST_CASE("agreement between two judges of one criterion on the same events") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4},
                  {"relevancy", "answer_relevancy", 1, 4},
                  {"faith_mini", "faithfulness", 1, 4}},
                 tenPairs(), reg);
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = "e" + std::to_string(i);
    t.record(2, id, "", kHuman[i]);  // the later judge's verdict may arrive first
    t.record(0, id, "", kJudge[i]);
    t.record(1, id, "", 4 - kJudge[i] % 2);
    t.record(0, id, "", 1);  // a redelivery: replaces, pairs nothing twice
  }
  t.record(0, "only-one", "", 3);  // judged by one of them only: no pair
  t.refresh();
  const std::map<std::string, std::string> pair = {
      {"criterion", "faithfulness"}, {"judge_a", "faith_llm"}, {"judge_b", "faith_mini"}};
  CHECK(value(reg, "assay_judge_agreement_pairs", pair) == 10.0);
  CHECK(value(reg, "assay_judge_agreement_kendall_tau", pair) ==
        doctest::Approx(0.6944444444444444).epsilon(1e-9));
  CHECK(value(reg, "assay_judge_agreement_spearman", pair) ==
        doctest::Approx(0.7647058823529411).epsilon(1e-9));
  auto level = pair;
  level["level"] = "moderate";
  CHECK(value(reg, "assay_judge_agreement_level", level) == 1.0);
  level["level"] = "high";
  CHECK(value(reg, "assay_judge_agreement_level", level) == 0.0);
  CHECK_FALSE(value(reg, "assay_judge_agreement_pairs", {{"judge_a", "relevancy"}}));
  CHECK_FALSE(value(reg, "assay_judge_agreement_pairs", {{"judge_b", "relevancy"}}));
}

TEST_CASE("agreement, human Spearman and kappa wait for tracking.min_pairs pairs") {
  prometheus::Registry reg;
  ScoreTracker t({{"a", "faithfulness", 1, 4}, {"b", "faithfulness", 1, 4}}, TrackingOptions{},
                 reg);
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = std::to_string(i);
    t.record(0, id, "", kJudge[i]);
    t.record(1, id, "", kHuman[i]);
    t.onFeedback({Feedback::Kind::kAnnotation, id, kHuman[i], "faithfulness", "x"});
    t.onFeedback({Feedback::Kind::kAnnotation, id, kJudge[i], "faithfulness", "y"});
  }
  t.refresh();
  CHECK(value(reg, "assay_judge_agreement_pairs", {{"judge_a", "a"}}) == 10.0);  // progress
  CHECK(value(reg, "assay_judge_human_pairs", {{"judge", "a"}}) == 20.0);
  CHECK_FALSE(value(reg, "assay_judge_agreement_kendall_tau", {}));  // 10 < 30: no statistic
  CHECK_FALSE(value(reg, "assay_judge_agreement_level", {}));
  CHECK_FALSE(value(reg, "assay_judge_human_spearman", {}));
  CHECK_FALSE(value(reg, "assay_annotator_kappa", {}));
}

TEST_CASE("agreement of constant judges is absent, not 1") {
  prometheus::Registry reg;
  ScoreTracker t({{"a", "faithfulness", 1, 4}, {"b", "faithfulness", 1, 4}}, tenPairs(), reg);
  for (int i = 0; i < 20; ++i) {
    t.record(0, std::to_string(i), "", 4);
    t.record(1, std::to_string(i), "", 4);
  }
  t.refresh();
  CHECK(value(reg, "assay_judge_agreement_pairs", {{"judge_a", "a"}}) == 20.0);
  CHECK_FALSE(value(reg, "assay_judge_agreement_kendall_tau", {{"judge_a", "a"}}));
  CHECK_FALSE(value(reg, "assay_judge_agreement_spearman", {{"judge_a", "a"}}));
  CHECK_FALSE(value(reg, "assay_judge_agreement_level", {{"judge_a", "a"}}));
}

TEST_CASE("annotations: judge-vs-human Spearman and Cohen's kappa between annotators") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, tenPairs(), reg);
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = "e" + std::to_string(i);
    Feedback ann{Feedback::Kind::kAnnotation, id, kHuman[i], "faithfulness", "alice"};
    if (i % 2) t.onFeedback(ann);  // half the annotations come before the event and its score
    t.noteEvent(id, "A", "chat");
    t.record(0, id, "A", kJudge[i]);
    if (i % 2 == 0) t.onFeedback(ann);
    // A second annotator: bob labels like the judge did.
    t.onFeedback({Feedback::Kind::kAnnotation, id, kJudge[i], "faithfulness", "bob"});
    t.onFeedback({Feedback::Kind::kAnnotation, id, 1, "answer_relevancy", "carol"});  // other
  }
  t.onFeedback({Feedback::Kind::kAnnotation, "e0", 1, "faithfulness", "alice"});  // duplicate
  t.refresh();
  // Two annotations per event pair with the judge: (judge, alice) and (judge, bob = judge).
  CHECK(value(reg, "assay_judge_human_pairs", kFaith) == 20.0);
  std::vector<double> x, y;
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    x.insert(x.end(), {double(kJudge[i]), double(kJudge[i])});
    y.insert(y.end(), {double(kHuman[i]), double(kJudge[i])});
  }
  CHECK(value(reg, "assay_judge_human_spearman", kFaith) ==
        doctest::Approx(stats::spearman(x, y)->coefficient).epsilon(1e-12));
  // Issue 31: tau-b and, on the judge's 1-4 scale, kappa too (scipy kendalltau, sklearn
  // cohen_kappa_score on the same 20 pairs).
  CHECK(value(reg, "assay_judge_human_kendall_tau", kFaith) ==
        doctest::Approx(0.8402777777777778).epsilon(1e-12));
  auto judge_none = kFaith, judge_quadratic = kFaith;
  judge_none["weighting"] = "none";
  judge_quadratic["weighting"] = "quadratic";
  CHECK(value(reg, "assay_judge_human_kappa", judge_none) ==
        doctest::Approx(0.7222222222222222).epsilon(1e-12));
  CHECK(value(reg, "assay_judge_human_kappa", judge_quadratic) ==
        doctest::Approx(0.8958333333333334).epsilon(1e-12));
  const std::map<std::string, std::string> pair = {
      {"criterion", "faithfulness"}, {"annotator_a", "alice"}, {"annotator_b", "bob"}};
  auto none = pair, quadratic = pair;
  none["weighting"] = "none";
  quadratic["weighting"] = "quadratic";
  CHECK(value(reg, "assay_annotator_kappa", none) ==
        doctest::Approx(0.4444444444444444).epsilon(1e-9));
  CHECK(value(reg, "assay_annotator_kappa", quadratic) ==
        doctest::Approx(0.7916666666666666).epsilon(1e-9));
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "annotation"}, {"outcome", "joined"}}) == 30.0);
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "annotation"}, {"outcome", "duplicate"}}) == 1.0);
  CHECK(value(reg, "assay_feedback_pending", {}) == 0.0);
}

TEST_CASE("judge-vs-human with only the issue's ten pairs: rho 0.7647") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, tenPairs(), reg);
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = "e" + std::to_string(i);
    t.record(0, id, "", kJudge[i]);
    t.onFeedback({Feedback::Kind::kAnnotation, id, kHuman[i], "faithfulness", "alice"});
  }
  t.refresh();
  CHECK(value(reg, "assay_judge_human_spearman", kFaith) ==
        doctest::Approx(0.7647058823529411).epsilon(1e-9));
}

TEST_CASE("A/B on ratings: chi-square per experiment, decided at p < 0.05 with 30 per arm") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, TrackingOptions{}, reg);
  // Stars tables (scipy.stats.chi2_contingency(correction=False)):
  //   A [2,3,5,10,10] vs B [8,7,6,5,4] → chi2 9.52900432900433, p 0.04915467257177864
  //   A [2,3,5,10,9]  vs B [8,7,6,5,4] → p 0.06453092211480674 (A has 29 ratings)
  const std::vector<int> a = {2, 3, 5, 10, 9}, b = {8, 7, 6, 5, 4};
  int id = 0;
  auto rate = [&](const std::string& variant, int stars, bool feedback_first) {
    const std::string key = "r" + std::to_string(id++);
    if (feedback_first) t.onFeedback({Feedback::Kind::kRating, key, stars, "", ""});
    t.noteEvent(key, variant, "search");
    if (!feedback_first) t.onFeedback({Feedback::Kind::kRating, key, stars, "", ""});
  };
  for (int s = 0; s < 5; ++s) {
    for (int k = 0; k < a[static_cast<std::size_t>(s)]; ++k) rate("A", s + 1, k % 2 == 0);
    for (int k = 0; k < b[static_cast<std::size_t>(s)]; ++k) rate("B", s + 1, k % 3 == 0);
  }
  t.refresh();
  const std::map<std::string, std::string> exp = {{"experiment", "search"}};
  CHECK(value(reg, "assay_ab_p_value", exp) == doctest::Approx(0.06453092211480674).epsilon(1e-9));
  CHECK(value(reg, "assay_ab_decided", exp) == 0.0);
  CHECK(value(reg, "assay_ab_ratings", {{"experiment", "search"}, {"variant", "A"}}) == 29.0);
  rate("A", 5, false);
  t.onFeedback({Feedback::Kind::kRating, "r0", 1, "", ""});  // a second rating: duplicate
  t.refresh();
  CHECK(value(reg, "assay_ab_p_value", exp) == doctest::Approx(0.04915467257177864).epsilon(1e-9));
  CHECK(value(reg, "assay_ab_decided", exp) == 1.0);
  CHECK(value(reg, "assay_feedback_events_total", {{"kind", "rating"}, {"outcome", "joined"}}) ==
        60.0);
  CHECK(value(reg, "assay_feedback_events_total", {{"kind", "rating"}, {"outcome", "duplicate"}}) ==
        1.0);
  // One arm only: no test, no series.
  t.noteEvent("solo", "A", "other-app");
  t.onFeedback({Feedback::Kind::kRating, "solo", 3, "", ""});
  t.refresh();
  CHECK_FALSE(value(reg, "assay_ab_p_value", {{"experiment", "other-app"}}));
}

TEST_CASE("A/B: experiments past the label limit are not pooled; Cochran's rule is exported") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.max_label_values = 2;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg);
  int id = 0;
  const auto rate = [&](const std::string& experiment, const std::string& variant, int stars) {
    const std::string key = "x" + std::to_string(id++);
    t.noteEvent(key, variant, experiment);
    t.onFeedback({Feedback::Kind::kRating, key, stars, "", ""});
  };
  // The issue's table: A [0, 0, 5, 10, 15], B [0, 3, 4, 12, 11] over 1–5 stars → the 1-star
  // column (no rating) is dropped: chi2 3.908, 3 degrees of freedom, p 0.2715
  // (scipy.stats.chi2_contingency(correction=False) on the 2 × 4 table); expected counts
  // [1.5, 4.5, 11, 13] per row: half the cells below 5, so the approximation is flagged.
  const std::vector<int> a = {0, 0, 5, 10, 15}, b = {0, 3, 4, 12, 11};
  for (int s = 0; s < 5; ++s) {
    for (int k = 0; k < a[static_cast<std::size_t>(s)]; ++k) rate("search", "A", s + 1);
    for (int k = 0; k < b[static_cast<std::size_t>(s)]; ++k) rate("search", "B", s + 1);
  }
  // Two more experiments with one arm and one rating each: the second is past the limit (2).
  rate("chat", "A", 5);
  rate("summaries", "A", 1);
  rate("summaries", "B", 5);
  t.refresh();
  const std::map<std::string, std::string> exp = {{"experiment", "search"}};
  CHECK(value(reg, "assay_ab_p_value", exp) == doctest::Approx(0.27153628879603364).epsilon(1e-9));
  CHECK(value(reg, "assay_ab_expected_min", exp) == doctest::Approx(1.5));
  CHECK(value(reg, "assay_ab_reliable", exp) == 0.0);
  CHECK(value(reg, "assay_ab_decided", exp) == 0.0);
  // No experiment "other" pools chat and summaries; summaries is not tested at all.
  CHECK_FALSE(value(reg, "assay_ab_p_value", {{"experiment", "other"}}));
  CHECK_FALSE(value(reg, "assay_ab_p_value", {{"experiment", "summaries"}}));
  CHECK_FALSE(value(reg, "assay_ab_ratings", {{"experiment", "summaries"}}));
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "rating"}, {"outcome", "experiment_over_limit"}}) == 2.0);
}

TEST_CASE("feedback whose event never comes is held, then counted unmatched when evicted") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.join_capacity = 100;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg);
  t.onFeedback({Feedback::Kind::kRating, "ghost", 5, "", ""});
  t.refresh();
  CHECK(value(reg, "assay_feedback_pending", {}) == 1.0);
  for (int i = 0; i < 100; ++i) t.noteEvent("e" + std::to_string(i), "A", "");
  t.refresh();
  CHECK(value(reg, "assay_feedback_pending", {}) == 0.0);
  CHECK(value(reg, "assay_feedback_events_total", {{"kind", "rating"}, {"outcome", "unmatched"}}) ==
        1.0);
  CHECK_FALSE(value(reg, "assay_ab_p_value", {}));
}

TEST_CASE("feedback parsing: valid events, and errors that say what is wrong") {
  std::string error, kind;
  auto f = parseFeedback(R"({"id":"q1","kind":"rating","value":4})", "", error, kind);
  REQUIRE(f);
  CHECK(f->kind == Feedback::Kind::kRating);
  CHECK(f->value == 4);
  f = parseFeedback(R"({"kind":"annotation","criterion":"faithfulness","value":3})", "key-7", error,
                    kind);
  REQUIRE(f);
  CHECK(f->id == "key-7");
  CHECK(f->annotator == "unknown");
  CHECK_FALSE(parseFeedback(R"({"kind":"rating","value":4})", "key-\xff", error, kind));
  CHECK(error == "/id: missing, and the message key is not valid UTF-8");
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"{", "not JSON"},
      {"[1]", "not a JSON object"},
      {R"({"id":"a","value":3})", "/kind: missing"},
      {R"({"id":"a","kind":"stars","value":3})", "/kind: expected"},
      {R"({"id":"a","kind":"rating","value":6})", "/value: expected an integer from 1 to 5"},
      {R"({"id":"a","kind":"rating","value":4.5})", "/value: expected an integer"},
      {R"({"id":"a","kind":"rating","value":"4"})", "/value: expected a number"},
      {R"({"kind":"rating","value":4})", "/id: missing"},
      {R"({"id":7,"kind":"rating","value":4})", "/id: expected a string"},
      {R"({"id":"a","kind":"annotation","value":4})", "/criterion: missing"},
      // Issue 28: one rating naming such an experiment made promtool refuse all of /metrics.
      {R"({"id":"a","kind":"rating","value":4,"experiment":"x\udc00"})", "half a surrogate"},
      {R"({"id":"a","kind":"annotation","criterion":"c\ud800","value":4})", "half a surrogate"},
      {R"({"id":"a","kind":"annotation","criterion":"c","annotator":"\udfff","value":4})",
       "half a surrogate"},
      {"{\"id\":\"a\",\"kind\":\"rating\",\"value\":4,\"experiment\":\"x\xff\"}",
       "invalid UTF-8 sequence at byte"},
  };
  for (const auto& item : bad) {
    const auto& payload = item.first;  // a named variable: clang 14 cannot capture a binding
    const auto& message = item.second;
    CAPTURE(payload);
    error.clear();
    CHECK_FALSE(parseFeedback(payload, "", error, kind));
    CHECK(error.find(message) != std::string::npos);
  }
}

TEST_CASE("a baseline from a judgments file, optionally limited to a time range") {
  const std::string path = "/tmp/assay_baseline_test.jsonl";
  {
    std::ofstream out(path);
    out << R"({"id":"1","judged_at":"2026-11-01T10:00:00.000Z","verdicts":[{"judge":"f","score":4},{"judge":"g","score":null,"error":"timeout"}]})"
        << "\n\n"
        << R"({"id":"2","judged_at":"2026-11-02T10:00:00.000Z","verdicts":[{"judge":"f","score":3},{"judge":"g","score":0.5}]})"
        << "\n"
        << R"({"id":"3","judged_at":"2026-11-03T10:00:00.000Z","verdicts":[{"judge":"f","score":2}]})"
        << "\n";
  }
  const auto all = loadBaselineScores(path, std::nullopt, std::nullopt);
  CHECK(all.at("f") == std::vector<double>{4, 3, 2});
  CHECK(all.at("g") == std::vector<double>{0.5});  // the failed verdict is not a score
  const auto range = loadBaselineScores(path, parseRfc3339("2026-11-02T00:00:00Z"),
                                        parseRfc3339("2026-11-03T10:00:00Z"));
  CHECK(range.at("f") == std::vector<double>{3});  // until is exclusive
  {
    std::ofstream out(path, std::ios::app);
    out << "not json\n";
  }
  CHECK_THROWS_WITH(loadBaselineScores(path, std::nullopt, std::nullopt),
                    "/tmp/assay_baseline_test.jsonl:5: not a judgment (JSON object) line");
  CHECK_THROWS_WITH(loadBaselineScores("/nonexistent/b.jsonl", std::nullopt, std::nullopt),
                    "/nonexistent/b.jsonl: cannot open the baseline file");
  std::remove(path.c_str());

  // A frozen baseline drives the drift test from the first recent window.
  prometheus::Registry reg;
  TrackingOptions o;
  o.recent_window = 20;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg);
  t.setBaseline(0, std::vector<double>(50, 4.0));
  for (int i = 0; i < 20; ++i) t.record(0, std::to_string(i), "", i % 2 ? 2 : 3);
  t.refresh();
  CHECK(value(reg, "assay_score_baseline_mean", kFaith) == 4.0);
  CHECK(value(reg, "assay_score_drift", kFaith) == 1.0);
}

TEST_CASE("label folding never merges people or arms inside a statistic") {
  prometheus::Registry reg;
  TrackingOptions o = tenPairs();
  o.max_label_values = 2;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg);
  // Four annotators on the same ten events: only a and b keep their label value.
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = "e" + std::to_string(i);
    t.noteEvent(id, "A", "");
    for (const char* who : {"ann-a", "ann-b", "ann-c", "ann-d"}) {
      const bool like_judge = std::string(who) == "ann-b" || std::string(who) == "ann-d";
      t.onFeedback({Feedback::Kind::kAnnotation, id, like_judge ? kJudge[i] : kHuman[i],
                    "faithfulness", who});
    }
  }
  t.refresh();
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "annotation"}, {"outcome", "joined"}}) == 40.0);
  CHECK_FALSE(value(reg, "assay_feedback_events_total", {{"outcome", "duplicate"}}));
  CHECK(value(reg, "assay_annotator_kappa",
              {{"annotator_a", "ann-a"}, {"annotator_b", "ann-b"}, {"weighting", "none"}}) ==
        doctest::Approx(0.4444444444444444).epsilon(1e-9));
  CHECK_FALSE(value(reg, "assay_annotator_kappa", {{"annotator_b", "other"}}));
  CHECK_FALSE(value(reg, "assay_annotator_kappa", {{"annotator_a", "ann-c"}}));

  // A/B: the test runs on the three real arms; the ratings gauge folds the third into other.
  // An event without a variant is not an arm: its rating counts as no_variant.
  prometheus::Registry reg2;
  ScoreTracker ab({{"faith_llm", "faithfulness", 1, 4}}, o, reg2);
  int id = 0;
  for (const char* arm : {"A", "B", "C"})
    for (int k = 0; k < 30; ++k) {
      const std::string key = std::to_string(id++);
      ab.noteEvent(key, arm, "x");
      ab.onFeedback(
          {Feedback::Kind::kRating, key, std::string(arm) == "A" ? 5 : 1 + k % 5, "", ""});
    }
  ab.noteEvent("no-arm", "", "x");
  ab.onFeedback({Feedback::Kind::kRating, "no-arm", 1, "", ""});
  ab.refresh();
  CHECK(value(reg2, "assay_feedback_events_total",
              {{"kind", "rating"}, {"outcome", "no_variant"}}) == 1.0);
  CHECK(value(reg2, "assay_ab_ratings", {{"variant", "A"}}) == 30.0);
  CHECK(value(reg2, "assay_ab_ratings", {{"variant", "other"}}) == 30.0);  // C, folded
  // scipy.stats.chi2_contingency([[0,0,0,0,30],[6]*5,[6]*5], correction=False).pvalue
  CHECK(value(reg2, "assay_ab_p_value", {{"experiment", "x"}}) ==
        doctest::Approx(2.1695729204263763e-08).epsilon(1e-9));
  CHECK(value(reg2, "assay_ab_decided", {{"experiment", "x"}}) == 1.0);
}

TEST_CASE("interval overlap only among the ten largest variants") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.max_label_values = 50;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, o, reg);
  int id = 0;
  for (int v = 0; v < 12; ++v)
    for (int k = 0; k < 3 + v; ++k)  // variant v11 has the most scores
      t.record(0, std::to_string(id++), "v" + std::to_string(v), 1 + k % 4);
  t.refresh();
  std::size_t overlap_series = 0;
  for (const auto& f : reg.Collect())
    if (f.name == "assay_score_ci95_overlap") overlap_series = f.metric.size();
  CHECK(overlap_series == 45);                                                 // 10 choose 2
  CHECK_FALSE(value(reg, "assay_score_ci95_overlap", {{"variant_a", "v0"}}));  // smallest two
  CHECK(value(reg, "assay_score_mean", {{"variant", "v0"}}));                  // still exported
}

TEST_CASE("feedback nested too deep or with a NUL byte is invalid, never a crash") {
  std::string error, kind;
  const std::string deep = R"({"id":"a","kind":"rating","value":1,"x":)" +
                           std::string(200'000, '[') + std::string(200'000, ']') + "}";
  CHECK_FALSE(parseFeedback(deep, "", error, kind));
  CHECK(error.find("nested deeper than 128") != std::string::npos);
  const std::string nul = std::string(R"({"id":"a","kind":"rating","value":1})") + '\0' + "x";
  CHECK_FALSE(parseFeedback(nul, "", error, kind));
  CHECK(error.find("NUL byte") != std::string::npos);
}

TEST_CASE("per-event feedback is bounded: annotations per event, distinct criteria") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4, true}}, TrackingOptions{}, reg);
  t.noteEvent("evt", "", "");
  // 1,000 distinct annotators of one event grew memory to 1.25 GB (every pair a kappa window).
  for (int i = 0; i < 1000; ++i)
    t.onFeedback({Feedback::Kind::kAnnotation, "evt", 1 + i % 4, "faithfulness",
                  "annotator-" + std::to_string(i)});
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "annotation"}, {"outcome", "joined"}}) == 16.0);
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "annotation"}, {"outcome", "over_limit"}}) == 984.0);
  // 44,500 distinct criteria held the consuming thread 6 s: the first max_label_values (50)
  // criteria are kept, one annotation each per event here.
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "c" + std::to_string(i);
    t.noteEvent(id, "", "");
    t.onFeedback({Feedback::Kind::kAnnotation, id, 2, "criterion-" + std::to_string(i), "a"});
  }
  CHECK(
      value(reg, "assay_feedback_events_total", {{"kind", "annotation"}, {"outcome", "joined"}}) ==
      16.0 + 49.0);  // "faithfulness" is the first of the 50
  CHECK(value(reg, "assay_feedback_events_total",
              {{"kind", "annotation"}, {"outcome", "over_limit"}}) == 984.0 + 1951.0);
  t.refresh();
  // Pairs among the 16 kept annotators only: C(16, 2) = 120 kappa series at most (two weightings).
  std::size_t kappa_series = 0;
  for (const auto& f : reg.Collect())
    if (f.name == "assay_annotator_kappa") kappa_series = f.metric.size();
  CHECK(kappa_series <= 240);
}

TEST_CASE("a reload's judges: kept ones keep their windows, removed ones disappear") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4},
                  {"relevancy", "answer_relevancy", 1, 4},
                  {"faith_mini", "faithfulness", 1, 4}},
                 tenPairs(), reg);
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = "e" + std::to_string(i);
    t.record(0, id, "", kJudge[i]);
    t.record(1, id, "", 3);
    t.record(2, id, "", kHuman[i]);
  }
  t.refresh();
  const std::map<std::string, std::string> pair = {
      {"criterion", "faithfulness"}, {"judge_a", "faith_llm"}, {"judge_b", "faith_mini"}};
  REQUIRE(value(reg, "assay_judge_agreement_pairs", pair) == 10.0);
  // faith_mini removed, relevancy's scale changed (a new judge under the same name), a new one
  // added; faith_llm unchanged but moved to the end.
  const auto idx = t.setJudges({{"relevancy", "answer_relevancy", 1, 5},
                                {"coverage", "completeness", 0, 1},
                                {"faith_llm", "faithfulness", 1, 4}});
  CHECK(idx == std::vector<std::size_t>{3, 4, 0});
  t.record(2, "late", "", 4);  // a late score of the removed judge: ignored
  t.record(1, "late", "", 4);  // and of relevancy's old version
  t.record(3, "e0", "", 5);    // the new relevancy: 1..5
  t.refresh();
  CHECK(value(reg, "assay_judge_window_size", kFaith) == 10.0);  // kept, with its scores
  CHECK_FALSE(value(reg, "assay_judge_window_size", {{"judge", "faith_mini"}}));
  CHECK(value(reg, "assay_judge_window_size", {{"judge", "relevancy"}}) == 1.0);
  CHECK_FALSE(value(reg, "assay_judge_agreement_pairs", pair));  // names a removed judge
  // Setting the same judges again changes nothing.
  CHECK(t.setJudges({{"relevancy", "answer_relevancy", 1, 5},
                     {"coverage", "completeness", 0, 1},
                     {"faith_llm", "faithfulness", 1, 4}}) == idx);
}

TEST_CASE("a variant's interval stays on the scale and waits for tracking.min_interval_n scores") {
  prometheus::Registry reg;
  ScoreTracker t({{"overlap", "faithfulness", 0, 1}}, TrackingOptions{}, reg);  // min 5
  int id = 0;
  for (double x : {0.1, 0.9}) t.record(0, std::to_string(id++), "A", x);
  for (double x : {0.95, 1.0, 1.0, 1.0, 0.9}) t.record(0, std::to_string(id++), "B", x);
  t.refresh();
  const auto va = [&](const char* name, const char* v) {
    return value(reg, name, {{"judge", "overlap"}, {"variant", v}});
  };
  // A: two scores: mean and sd, no interval (it was [−4.58, 5.58] with t(0.975, 1) = 12.7).
  CHECK(va("assay_score_mean", "A") == doctest::Approx(0.5));
  CHECK(va("assay_score_n", "A") == 2.0);
  CHECK_FALSE(va("assay_score_ci95_low", "A"));
  CHECK_FALSE(va("assay_score_ci95_overlap", "A"));
  // B: five scores near the top: the upper end is cut at 1.
  CHECK(va("assay_score_ci95_high", "B") == 1.0);
  CHECK(va("assay_score_ci95_low", "B") ==
        doctest::Approx(0.97 - 2.7764451051977987 * 0.04472135954999579 / std::sqrt(5.0))
            .epsilon(1e-9));
}

TEST_CASE("feedback from a partition of another number than its event's is counted") {
  prometheus::Registry reg;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}}, TrackingOptions{}, reg);
  auto rating = [](std::string id, std::int32_t partition) {
    Feedback f;
    f.id = std::move(id);
    f.value = 4;
    f.partition = partition;
    return f;
  };
  const auto mismatches = [&] {
    return value(reg, "assay_feedback_partition_mismatch_total", {}).value_or(-1);
  };
  t.noteEvent("e1", "A", "qa", 2);
  t.onFeedback(rating("e1", 2));  // same number: co-partitioned producers
  CHECK(mismatches() == 0.0);
  t.noteEvent("e2", "A", "qa", 2);
  t.onFeedback(rating("e2", 5));  // joined here, but another partitioner put it on 5
  CHECK(mismatches() == 1.0);
  t.onFeedback(rating("e3", 1));    // held before its event...
  t.noteEvent("e3", "A", "qa", 0);  // ...whose partition differs
  CHECK(mismatches() == 2.0);
  t.noteEvent("e4", "A", "qa", -1);  // unknown partitions (an OTLP event, a file) say nothing
  t.onFeedback(rating("e4", 3));
  t.onFeedback(rating("e5", -1));
  t.noteEvent("e5", "A", "qa", 4);
  CHECK(mismatches() == 2.0);
  CHECK(value(reg, "assay_feedback_events_total", {{"kind", "rating"}, {"outcome", "joined"}}) ==
        5.0);  // every one of them joined all the same
}

TEST_CASE("a new version of a judge starts its statistics over, under its own judge_version") {
  // Issue 31: leniency, drift, agreement and the variants' intervals within one version only.
  prometheus::Registry reg;
  TrackedJudge v1{"faith_llm", "faithfulness", 1, 4, true, "aaaaaaaaaaaa"};
  TrackedJudge mini{"faith_mini", "faithfulness", 1, 4, true, "cccccccccccc"};
  ScoreTracker t({v1, mini}, tenPairs(), reg);
  for (std::size_t i = 0; i < kJudge.size(); ++i) {
    const std::string id = "e" + std::to_string(i);
    t.record(0, id, "A", kJudge[i]);
    t.record(1, id, "A", kHuman[i]);
  }
  t.refresh();
  const std::map<std::string, std::string> old_labels = {{"judge", "faith_llm"},
                                                         {"judge_version", "aaaaaaaaaaaa"}};
  CHECK(value(reg, "assay_judge_window_size", old_labels) == 10.0);
  CHECK(value(reg, "assay_score_n",
              {{"judge", "faith_llm"}, {"judge_version", "aaaaaaaaaaaa"}, {"variant", "A"}}) ==
        10.0);
  const std::map<std::string, std::string> pair = {{"judge_a", "faith_llm"},
                                                   {"judge_a_version", "aaaaaaaaaaaa"},
                                                   {"judge_b", "faith_mini"},
                                                   {"judge_b_version", "cccccccccccc"}};
  CHECK(value(reg, "assay_judge_agreement_pairs", pair) == 10.0);
  CHECK(value(reg, "assay_judge_agreement_kendall_tau", pair) ==
        doctest::Approx(0.6944444444444444));
  // A rubric edit: the same name, criterion and scale, another version.
  TrackedJudge v2 = v1;
  v2.version = "bbbbbbbbbbbb";
  const auto idx = t.setJudges({v2, mini});
  CHECK(idx == std::vector<std::size_t>{2, 1});  // a new index: empty windows
  t.record(0, "late", "A", 4);                   // a late score of the old version: ignored
  t.record(2, "e0", "A", 4);
  t.refresh();
  CHECK_FALSE(value(reg, "assay_judge_window_size", old_labels));  // gone with its version
  CHECK(value(reg, "assay_judge_window_size",
              {{"judge", "faith_llm"}, {"judge_version", "bbbbbbbbbbbb"}}) == 1.0);
  // The agreement of the old version's pairs is dropped; the new version's builds up again.
  CHECK_FALSE(value(reg, "assay_judge_agreement_pairs", pair));
  // (judge_a is the one of the lower index: faith_mini now)
  CHECK(value(reg, "assay_judge_agreement_pairs",
              {{"judge_b", "faith_llm"}, {"judge_b_version", "bbbbbbbbbbbb"}}) == 1.0);
  CHECK_FALSE(value(reg, "assay_judge_agreement_kendall_tau",
                    {{"judge_b", "faith_llm"}, {"judge_b_version", "bbbbbbbbbbbb"}}));
  // The same version again changes nothing.
  CHECK(t.setJudges({v2, mini}) == idx);
}

TEST_CASE("a drift baseline file is read for the judge's current version only") {
  const std::string path = "/tmp/assay_baseline_versions_" + std::to_string(::getpid());
  {
    std::ofstream f(path);
    f << R"({"id":"a","verdicts":[{"judge":"j","judge_version":"old","score":0.1}]})"
      << "\n"
      << R"({"id":"b","verdicts":[{"judge":"j","judge_version":"new","score":0.8}]})"
      << "\n"
      << R"({"id":"c","verdicts":[{"judge":"j","score":0.7}]})"
      << "\n"  // before versions
      << R"({"id":"d","verdicts":[{"judge":"k","judge_version":"x","score":0.5}]})"
      << "\n";
  }
  BaselineVersions versions;
  versions.keep = {{"j", "new"}};
  const auto scores = loadBaselineScores(path, std::nullopt, std::nullopt, &versions);
  CHECK(scores.at("j") == std::vector<double>{0.8, 0.7});
  CHECK(scores.at("k") == std::vector<double>{0.5});  // no version to keep: every one
  CHECK(versions.skipped == std::map<std::string, std::size_t>{{"j", 1}});
  std::filesystem::remove(path);
}
