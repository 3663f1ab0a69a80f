#include "cli/bakeoff/analysis.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>
#include <vector>

using namespace assay::bakeoff;

namespace {

/// One criterion weighing 100: the weighted score is the score.
const std::vector<Criterion> kOne = {{"overall", "", 100}};

/// A call in which every arm gets `arm_scores[arm]` on the single criterion, shown in `order`.
Call callOf(std::size_t judge, std::size_t input, std::size_t pass, std::vector<std::size_t> order,
            const std::vector<double>& arm_scores) {
  Call c{judge, input, pass, std::move(order), {}};
  for (double s : arm_scores) c.scores.push_back({s});
  return c;
}

}  // namespace

TEST_CASE("criteria: the default preset, weights that must sum to 100") {
  const auto d = defaultCriteria();
  REQUIRE(d.size() == 5);
  CHECK(criteriaProblem(d) == "");
  CHECK(d[0].name == "relevance");
  CHECK(d[0].weight == 30);
  CHECK(d[4].name == "format");
  CHECK(d[4].weight == 10);
  auto bad = d;
  bad[4].weight = 5;  // 30/25/20/15/5
  CHECK(criteriaProblem(bad) ==
        "weights must sum to 100: relevance 30 + completeness 25 + clarity 20 + accuracy 15 + "
        "format 5 = 95");
  CHECK(criteriaProblem({}) == "at least one criterion is needed");
  CHECK(criteriaProblem({{"a", "", 50}, {"a", "", 50}}) == "criterion 'a' is listed twice");
  std::vector<Criterion> eleven;
  for (int i = 0; i < 11; ++i) eleven.push_back({"c" + std::to_string(i), "", 100.0 / 11});
  CHECK(criteriaProblem(eleven) == "at most 10 criteria, not 11");
}

TEST_CASE("sizes: 2–8 arms, 1–10 inputs, at most 40 cells") {
  CHECK(sizeProblem(3, 10, 2, 1) == "");
  CHECK(sizeProblem(9, 1, 2, 1) == "9 arms: a bakeoff compares 2 to 8");
  CHECK(sizeProblem(5, 10, 2, 1) == "5 arms × 10 inputs = 50 cells: at most 40");
  CHECK(sizeProblem(4, 10, 2, 1) == "");  // exactly 40
  CHECK(sizeProblem(2, 11, 2, 1) == "11 inputs: a bakeoff takes 1 to 10");
  CHECK(sizeProblem(2, 2, 4, 1) == "4 judges: a bakeoff uses 2 or 3");
  CHECK(sizeProblem(2, 2, 2, 3) == "passes: 1, or 2 (the second with the order reversed)");
}

TEST_CASE("labels are mapped back to arms with the call's own order") {
  CHECK(label(0) == "A");
  CHECK(label(7) == "H");
  // Shown as A = arm 2, B = arm 0, C = arm 1.
  const auto scores = mapBack({2, 0, 1}, {{90}, {10}, {50}});
  CHECK(scores == std::vector<std::vector<double>>{{10}, {50}, {90}});
  CHECK_THROWS_AS(mapBack({0, 0, 1}, {{1}, {2}, {3}}), std::invalid_argument);
  CHECK(reversed({2, 0, 1}) == std::vector<std::size_t>{1, 0, 2});
  // Every order is a permutation, and all 6 orders of 3 arms come up.
  std::mt19937_64 rng(1);
  std::set<std::vector<std::size_t>> seen;
  for (int i = 0; i < 200; ++i) {
    auto o = randomOrder(3, rng);
    auto sorted = o;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == std::vector<std::size_t>{0, 1, 2});
    seen.insert(o);
  }
  CHECK(seen.size() == 6);
}

TEST_CASE("a judge that always prefers label A: no arm wins by position, the audit flags it") {
  constexpr std::size_t kArms = 3, kInputs = 10;
  std::mt19937_64 rng(20261201);
  std::vector<Call> calls;
  for (std::size_t input = 0; input < kInputs; ++input) {
    // Judge 0 scores whatever is shown first 90 and the others 50; judge 1 does the same.
    for (std::size_t judge = 0; judge < 2; ++judge) {
      const auto order = randomOrder(kArms, rng);
      std::vector<std::vector<double>> by_label = {{90}, {50}, {50}};
      Call c{judge, input, 0, order, mapBack(order, by_label)};
      calls.push_back(c);
    }
  }
  const Analysis a = analyze(kArms, kInputs, 2, kOne, calls);
  for (const auto& arm : a.arms) CHECK(arm.wins <= 7);
  for (const auto& audit : a.audit) {
    CAPTURE(audit.judge);
    CHECK(audit.calls == 10);
    CHECK(audit.first_shown == 10);
    CHECK(audit.share == 1.0);
    // scipy.stats.binomtest(10, 10, 1/3).pvalue
    CHECK(audit.p_value == doctest::Approx(1.693508780843028e-05).epsilon(1e-9));
    CHECK(audit.flagged);
  }
}

TEST_CASE("two judges with identical rankings agree (tau-b 1, high); reversed, -1 (low)") {
  const std::vector<double> scores = {70, 40, 90, 55};
  const std::vector<double> reversed_scores = {40, 70, 10, 55};  // the opposite order
  std::vector<Call> same, opposite;
  for (std::size_t input = 0; input < 2; ++input) {
    same.push_back(callOf(0, input, 0, {0, 1, 2, 3}, scores));
    same.push_back(callOf(1, input, 0, {3, 2, 1, 0}, scores));
    opposite.push_back(callOf(0, input, 0, {0, 1, 2, 3}, scores));
    opposite.push_back(callOf(1, input, 0, {0, 1, 2, 3}, reversed_scores));
  }
  for (const auto& [calls, tau, level] :
       {std::tuple{same, 1.0, Level::kHigh}, std::tuple{opposite, -1.0, Level::kLow}}) {
    const Analysis a = analyze(4, 2, 2, kOne, calls);
    REQUIRE(a.agreement.size() == 3);  // input 0, input 1, overall
    for (const auto& p : a.agreement) {
      REQUIRE(p.kendall_tau_b.has_value());
      CHECK(*p.kendall_tau_b == doctest::Approx(tau));
      CHECK(*p.spearman_rho == doctest::Approx(tau));
      CHECK(*p.level == level);
    }
    CHECK_FALSE(a.agreement.back().input.has_value());  // the overall one comes last
  }
  // Over 2 arms Spearman's rho is ±1 like Kendall's tau (it was n/a: scipy.stats.spearmanr's
  // statistic is 1.0 there; issue 29).
  std::vector<Call> two;
  two.push_back(callOf(0, 0, 0, {0, 1}, {70, 40}));
  two.push_back(callOf(1, 0, 0, {0, 1}, {40, 70}));
  const Analysis a2 = analyze(2, 1, 2, kOne, two);
  REQUIRE_FALSE(a2.agreement.empty());
  REQUIRE(a2.agreement.front().spearman_rho.has_value());
  CHECK(*a2.agreement.front().spearman_rho == -1.0);
  CHECK(*a2.agreement.front().kendall_tau_b == doctest::Approx(-1.0));
}

TEST_CASE("consensus intervals: 80, 82, 79 vs 81, 83, 80 overlap; 60, 62, 61 vs 90, 91, 92 not") {
  const auto run = [](const std::vector<double>& x, const std::vector<double>& y) {
    std::vector<Call> calls;
    for (std::size_t input = 0; input < 3; ++input)
      for (std::size_t judge = 0; judge < 2; ++judge)
        calls.push_back(callOf(judge, input, 0, {0, 1}, {x[input], y[input]}));
    return analyze(2, 3, 2, kOne, calls);
  };
  const Analysis close = run({80, 82, 79}, {81, 83, 80});
  // scipy: mean ± t.ppf(0.975, 2)·sd/√3
  CHECK(*close.arms[0].low == doctest::Approx(76.53875029959386).epsilon(1e-9));
  CHECK(*close.arms[0].high == doctest::Approx(84.1279163670728).epsilon(1e-9));
  REQUIRE(close.differences.size() == 1);
  CHECK(close.differences[0].overlap);  // "no significant difference"
  CHECK(close.arms[1].wins == 3);
  const Analysis apart = run({60, 62, 61}, {90, 91, 92});
  CHECK(*apart.arms[1].low == doctest::Approx(88.51586228815624).epsilon(1e-9));
  CHECK_FALSE(apart.differences[0].overlap);
  // Intervals never leave the scale: 98, 100, 99 has a t-interval reaching 101.5.
  const Analysis top = run({98, 100, 99}, {10, 10, 11});
  CHECK(*top.arms[0].high == 100.0);
  CHECK(top.student_t);
}

TEST_CASE("passes: 2 — a first place that flips with the order is position noise") {
  std::vector<Call> calls;
  // Judge 0 is consistent; judge 1 prefers whatever is shown first, in both passes.
  calls.push_back(callOf(0, 0, 0, {0, 1}, {80, 60}));
  calls.push_back(callOf(0, 0, 1, {1, 0}, {80, 60}));
  calls.push_back(callOf(1, 0, 0, {0, 1}, {70, 50}));  // arm 0 shown first wins
  calls.push_back(callOf(1, 0, 1, {1, 0}, {50, 70}));  // arm 1 shown first wins
  const Analysis a = analyze(2, 1, 2, kOne, calls);
  CHECK(a.audit[0].flips == 0);
  CHECK(a.audit[1].flips == 1);
  CHECK(a.inputs_with_position_noise == 1);
  CHECK(a.audit[1].first_shown == 2);
  // Judge 1's two passes average to 60 for both arms: the consensus follows judge 0.
  CHECK(a.consensus[0][0] == doctest::Approx((80 + 60) / 2.0));
  CHECK(a.consensus[0][1] == doctest::Approx((60 + 60) / 2.0));
  CHECK_THROWS_AS(analyze(2, 1, 2, kOne, {callOf(2, 0, 0, {0, 1}, {1, 2})}), std::invalid_argument);
}

TEST_CASE("a position-biased judge: the consensus with and without it, exclude_biased") {
  // Judge 0 always prefers what it is shown first (flagged); judge 1 scores arm 0 at 80, arm 1
  // at 40 wherever they are shown. 10 inputs, 2 arms.
  constexpr std::size_t kArms = 2, kInputs = 10;
  std::mt19937_64 rng(20261204);
  std::vector<Call> calls;
  for (std::size_t input = 0; input < kInputs; ++input) {
    const auto biased = std::vector<std::size_t>{input % 2, 1 - input % 2};  // arm 0 first half
    calls.push_back(Call{0, input, 0, biased, mapBack(biased, {{90}, {10}})});
    calls.push_back(callOf(1, input, 0, randomOrder(kArms, rng), {80, 40}));
  }
  // Judge 0 wins with label A 10 of 10 times: flagged (binomial p ≈ 0.002 against 1/2).
  const Analysis kept = analyze(kArms, kInputs, 2, kOne, calls);
  REQUIRE(kept.audit[0].flagged);
  REQUIRE_FALSE(kept.audit[1].flagged);
  CHECK(kept.excluded.empty());
  // In: arm 0 = mean of (90 or 10, alternating) and 80 = (50 + 80) / 2 = 65; arm 1 = 45.
  CHECK(kept.arms[0].mean == doctest::Approx(65.0));
  CHECK(kept.arms[1].mean == doctest::Approx(45.0));
  // The other view, without judge 0: 80 and 40.
  REQUIRE(kept.arms_other_view.size() == kArms);
  CHECK(kept.arms_other_view[0].mean == doctest::Approx(80.0));
  CHECK(kept.arms_other_view[1].mean == doctest::Approx(40.0));
  // exclude_biased: the other way round.
  const Analysis excluded = analyze(kArms, kInputs, 2, kOne, calls, /*exclude_biased=*/true);
  CHECK(excluded.excluded == std::vector<std::size_t>{0});
  CHECK(excluded.arms[0].mean == doctest::Approx(80.0));
  CHECK(excluded.arms_other_view[0].mean == doctest::Approx(65.0));
  // No flagged judge: no other view, nothing excluded.
  std::vector<Call> fair;
  for (std::size_t input = 0; input < kInputs; ++input)
    for (std::size_t judge = 0; judge < 2; ++judge)
      fair.push_back(callOf(judge, input, 0, randomOrder(kArms, rng), {80, 40}));
  const Analysis none = analyze(kArms, kInputs, 2, kOne, fair, true);
  CHECK(none.excluded.empty());
  CHECK(none.arms_other_view.empty());
}
