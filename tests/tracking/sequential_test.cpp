#include "tracking/sequential.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "tracking/stats.hpp"

using namespace assay::stats;

namespace {

using Stars = std::array<double, 5>;  // P(1 star) … P(5 stars)

/// One simulated experiment, both rules checked after every rating: the seed's (Pearson
/// chi-square p < 0.05 once each arm has 30 ratings) and the anytime-valid test at α = 0.05.
struct Run {
  bool seed_rejected = false, anytime_rejected = false;
};

Run simulate(const Stars& a, const Stars& b, int ratings, std::mt19937_64& rng) {
  std::discrete_distribution<int> stars_a(a.begin(), a.end()), stars_b(b.begin(), b.end());
  std::bernoulli_distribution arm_b(0.5);  // the router's 50/50 split
  SequentialIndependenceTest anytime(2, 5);
  std::vector<std::vector<double>> table(2, std::vector<double>(5, 0.0));
  Run r;
  for (int i = 0; i < ratings; ++i) {
    const bool in_b = arm_b(rng);
    const int level = in_b ? stars_b(rng) : stars_a(rng);
    anytime.add(in_b ? 1 : 0, static_cast<std::size_t>(level));
    table[in_b ? 1 : 0][static_cast<std::size_t>(level)] += 1;
    if (!r.seed_rejected) {
      double na = 0, nb = 0;
      for (double c : table[0]) na += c;
      for (double c : table[1]) nb += c;
      if (na >= 30 && nb >= 30)
        if (const auto chi = chiSquareIndependence(table); chi && chi->p_value < 0.05)
          r.seed_rejected = true;
    }
  }
  r.anytime_rejected = anytime.rejects(0.05);
  return r;
}

}  // namespace

TEST_CASE("the anytime-valid test: an e-process by construction, checked on small cases") {
  CHECK_THROWS_AS(SequentialIndependenceTest(1, 5), std::invalid_argument);
  SequentialIndependenceTest t(2, 5);
  CHECK_THROWS_AS(t.add(2, 0), std::out_of_range);
  CHECK(t.pValue() == 1.0);
  // First rating: p̂ = ½ / 1 = ½ for either arm; the null's maximum is 1 (one arm, share 1):
  // log M = log ½.
  t.add(0, 4);
  CHECK(t.logE() == doctest::Approx(std::log(0.5)));
  CHECK(t.maxLogE() == 0.0);  // M_0 = 1 stays the supremum
  // Second rating, other arm, same level: p̂(1 | 5) = ½ / 2; the null's maximum ½ · ½:
  // log M = log(½ · ¼) − log(¼) = log ½.
  t.add(1, 4);
  CHECK(t.logE() == doctest::Approx(std::log(0.5)));
  // Arms perfectly separated by stars: 40 ratings of arm 0 at 1 star, 40 of arm 1 at 5 stars.
  SequentialIndependenceTest sep(2, 5);
  for (int i = 0; i < 40; ++i) {
    sep.add(0, 0);
    sep.add(1, 4);
  }
  CHECK(sep.rejects(0.05));
  CHECK(sep.pValue() < 1e-10);
  // The p-value never increases.
  SequentialIndependenceTest mono(2, 5);
  double last = 1.0;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    mono.add(static_cast<std::size_t>(rng() % 2), static_cast<std::size_t>(rng() % 5));
    CHECK(mono.pValue() <= last);
    last = mono.pValue();
  }
}

TEST_CASE("A/A and A/B simulations: peeking at the chi-square vs the anytime-valid test") {
  // 1,000 experiments of 1,000 ratings each, both rules checked after every rating.
  constexpr int kRuns = 1000, kRatings = 1000;
  const Stars same = {0.10, 0.10, 0.20, 0.30, 0.30};  // mean 3.6 stars, in both arms
  std::mt19937_64 rng(20261201);
  int seed_fp = 0, anytime_fp = 0;
  for (int i = 0; i < kRuns; ++i) {
    const Run r = simulate(same, same, kRatings, rng);
    seed_fp += r.seed_rejected;
    anytime_fp += r.anytime_rejected;
  }
  const double seed_rate = static_cast<double>(seed_fp) / kRuns;
  const double anytime_rate = static_cast<double>(anytime_fp) / kRuns;
  std::printf(
      "A/A, %d runs of %d ratings, checked after every rating: false positives, seed's rule "
      "(chi-square p < 0.05, 30 per arm) %.3f, anytime-valid test %.3f\n",
      kRuns, kRatings, seed_rate, anytime_rate);
  CHECK(anytime_rate <= 0.05);
  CHECK(seed_rate > 0.15);  // peeking: several times the nominal 5 %
  // Power on a real difference: mean 3.6 vs 3.9 stars.
  const Stars better = {0.05, 0.10, 0.15, 0.30, 0.40};  // mean 3.9
  int seed_tp = 0, anytime_tp = 0;
  constexpr int kPowerRuns = 200, kPowerRatings = 3000;
  for (int i = 0; i < kPowerRuns; ++i) {
    const Run r = simulate(same, better, kPowerRatings, rng);
    seed_tp += r.seed_rejected;
    anytime_tp += r.anytime_rejected;
  }
  const double power = static_cast<double>(anytime_tp) / kPowerRuns;
  std::printf(
      "A/B, 3.6 vs 3.9 stars, %d runs of %d ratings: power, seed's rule %.3f (at its inflated "
      "error rate), anytime-valid test %.3f\n",
      kPowerRuns, kPowerRatings, static_cast<double>(seed_tp) / kPowerRuns, power);
  CHECK(power >= 0.8);
}
