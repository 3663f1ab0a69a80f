#include "tracking/stats.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

using namespace assay::stats;

namespace {

constexpr double kTol = 1e-9;

struct Golden {
  std::vector<double> x, y;
  double rho, p, tau, kappa, qkappa;  // NAN where sklearn's kappa needs integer labels
};

// scipy.stats.spearmanr, kendalltau(variant="b"), sklearn cohen_kappa_score (plain, quadratic):
// tests/golden/stats_golden.py.
const std::vector<Golden> kGolden = {
    {{4, 2, 3, 4, 1, 3, 2, 4, 3, 2},
     {4, 2, 4, 3, 1, 3, 3, 4, 2, 2},
     0.764705882352941,
     0.009982232408301438,
     0.6944444444444445,
     0.4444444444444444,
     0.7916666666666666},
    {{2, 2, 2, 3, 4},
     {4, 3, 2, 2, 1},
     -0.8029550685469662,
     0.10183797037740712,
     -0.7559289460184545,
     -0.17647058823529393,
     -0.7441860465116279},
    {{1, 2, 3, 4, 5, 6},
     {2, 1, 4, 3, 6, 5},
     0.8285714285714287,
     0.04156268221574334,
     0.6,
     -0.19999999999999973,
     0.8285714285714285},
    {{1, 1, 2, 2, 3, 3, 4, 4},
     {1, 2, 1, 3, 2, 4, 3, 4},
     0.7000000000000001,
     0.05322374999999995,
     0.5833333333333335,
     0.0,
     0.7},
    {{3, 3, 3, 3, 4, 4, 1, 2, 2, 1, 4, 3},
     {3, 4, 3, 2, 4, 4, 1, 1, 2, 2, 3, 3},
     0.816011266947032,
     0.001208281878063681,
     0.7309043957071794,
     0.4285714285714286,
     0.8},
    {{1, 4, 2, 4, 3, 1, 2, 3, 4, 4, 1},
     {2, 4, 2, 3, 3, 1, 1, 3, 4, 3, 2},
     0.8553921568627448,
     0.0007867651192966952,
     0.75,
     0.40860215053763427,
     0.8172757475083057},
    {{4, 4, 4, 4, 3, 4, 4, 2, 4, 4},
     {4, 3, 4, 4, 3, 4, 2, 2, 4, 3},
     0.5399596627432189,
     0.10715260300953063,
     0.5227282102428386,
     0.4545454545454546,
     0.4915254237288136},
    {{1, 2, 1, 2, 1, 2, 1, 2, 1, 2},
     {2, 1, 2, 1, 2, 2, 1, 1, 2, 1},
     -0.6,
     0.06668799999999996,
     -0.6,
     -0.6000000000000001,
     -0.6000000000000001},
    {{5, 3, 4, 2, 1, 5, 4, 3, 2, 1, 3, 3, 4},
     {4, 3, 5, 2, 2, 5, 3, 3, 1, 1, 4, 2, 4},
     0.8536664440485665,
     0.00020507268287464007,
     0.7519009528967117,
     0.32089552238805974,
     0.8372093023255813},
    {{0.9, 0.5, 0.5, 0.2, 0.7, 0.7, 0.1, 0.3},
     {0.8, 0.6, 0.4, 0.2, 0.9, 0.7, 0.1, 0.1},
     0.9091076054353293,
     0.0017516076452427766,
     0.792593923901217,
     NAN,
     NAN},
    {{2, 3, 2, 3, 2, 3, 4, 4, 1, 1, 2, 3, 4, 1},
     {3, 3, 2, 2, 2, 4, 4, 3, 1, 2, 2, 3, 4, 1},
     0.8323778954636373,
     0.00022087579765569824,
     0.7639625771048408,
     0.5172413793103449,
     0.8275862068965517},
};

std::vector<int> ints(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("issue 4 case: judge vs human on ten items") {
  const std::vector<double> judge = {4, 2, 3, 4, 1, 3, 2, 4, 3, 2};
  const std::vector<double> human = {4, 2, 4, 3, 1, 3, 3, 4, 2, 2};
  const auto s = spearman(judge, human);
  REQUIRE(s.has_value());
  CHECK(s->coefficient == doctest::Approx(0.7647).epsilon(1e-4));
  CHECK(s->p_value == doctest::Approx(0.0100).epsilon(1e-2));
  CHECK(*kendallTauB(judge, human) == doctest::Approx(0.6944).epsilon(1e-4));
  CHECK(*cohenKappa(ints(judge), ints(human)) == doctest::Approx(0.4444).epsilon(1e-4));
  CHECK(*cohenKappa(ints(judge), ints(human), KappaWeights::kQuadratic) ==
        doctest::Approx(0.7917).epsilon(1e-4));
}

TEST_CASE("Spearman with ties uses average ranks; constant vectors are undefined") {
  const auto s = spearman({2, 2, 2, 3, 4}, {4, 3, 2, 2, 1});
  REQUIRE(s.has_value());
  CHECK(s->coefficient == doctest::Approx(-0.803).epsilon(1e-3));
  // The no-ties shortcut 1 − 6Σd²/(n(n²−1)) would give −0.575 on these ranks.
  CHECK(std::abs(s->coefficient - (-0.575)) > 0.2);
  CHECK_FALSE(spearman({3, 3, 3}, {3, 3, 3}).has_value());
  CHECK_FALSE(spearman({1, 2, 3}, {2, 2, 2}).has_value());
  CHECK_FALSE(spearman({1, 2}, {1, 2}).has_value());  // n < 3
  // The coefficient alone is defined from 2 (scipy.stats.spearmanr([1, 2], [3, 4]).statistic
  // is 1.0, [4, 3] gives -1.0; its p-value is nan): a bakeoff of 2 arms (issue 29).
  CHECK(spearmanRho({1, 2}, {3, 4}) == 1.0);
  CHECK(spearmanRho({1, 2}, {4, 3}) == -1.0);
  CHECK_FALSE(spearmanRho({1, 1}, {3, 4}).has_value());
  CHECK_FALSE(spearmanRho({1}, {3}).has_value());
  // From 3 it is spearman()'s (scipy: 0.8660254037844387 for [1, 2, 2] and [1, 3, 2]).
  CHECK(*spearmanRho({1, 2, 2}, {1, 3, 2}) == doctest::Approx(0.8660254037844387).epsilon(1e-12));
  CHECK_FALSE(spearman({1, 2, 3}, {1, 2}).has_value());  // sizes differ
  CHECK_FALSE(kendallTauB({1, 1, 1}, {1, 2, 3}).has_value());
  CHECK_FALSE(cohenKappa({2, 2, 2}, {2, 2, 2}).has_value());  // one category: undefined
  CHECK_FALSE(cohenKappa({}, {}).has_value());
}

TEST_CASE("eleven vectors with ties agree with scipy and sklearn to 1e-9") {
  for (const auto& g : kGolden) {
    CAPTURE(g.rho);
    const auto s = spearman(g.x, g.y);
    REQUIRE(s.has_value());
    CHECK(s->coefficient == doctest::Approx(g.rho).epsilon(kTol));
    CHECK(s->p_value == doctest::Approx(g.p).epsilon(kTol));
    CHECK(*kendallTauB(g.x, g.y) == doctest::Approx(g.tau).epsilon(kTol));
    if (!std::isnan(g.kappa)) {
      CHECK(*cohenKappa(ints(g.x), ints(g.y)) == doctest::Approx(g.kappa).epsilon(kTol));
      CHECK(*cohenKappa(ints(g.x), ints(g.y), KappaWeights::kQuadratic) ==
            doctest::Approx(g.qkappa).epsilon(kTol));
    }
  }
}

TEST_CASE("Kendall tau-b: O(n log n) equals the pairwise count, and scipy at n = 100,000") {
  // The definition, pair by pair: the reference for random vectors full of ties.
  const auto pairwise = [](const std::vector<double>& x, const std::vector<double>& y) {
    long long c = 0, d = 0, tx = 0, ty = 0;
    const std::size_t n = x.size();
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j) {
        const double dx = x[i] - x[j], dy = y[i] - y[j];
        if (dx == 0) ++tx;
        if (dy == 0) ++ty;
        if (dx != 0 && dy != 0) ((dx > 0) == (dy > 0) ? c : d) += 1;
      }
    const double n0 = static_cast<double>(n) * static_cast<double>(n - 1) / 2;
    return static_cast<double>(c - d) /
           std::sqrt((n0 - static_cast<double>(tx)) * (n0 - static_cast<double>(ty)));
  };
  std::uint64_t state = 42;
  const auto next = [&](int range) {  // splitmix64, reproducible
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<double>((z ^ (z >> 31)) % static_cast<std::uint64_t>(range));
  };
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 2 + static_cast<std::size_t>(next(200));
    const int range = 2 + static_cast<int>(next(12));  // few distinct values: many ties
    std::vector<double> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = next(range);
      y[i] = trial % 2 ? next(range) : x[i] + next(3);  // independent, or correlated
    }
    const auto tau = kendallTauB(x, y);
    if (!tau) continue;  // a constant vector
    ++compared;
    CHECK(*tau == doctest::Approx(pairwise(x, y)).epsilon(1e-12));
  }
  CHECK(compared > 250);
  // scipy.stats.kendalltau(x, y, variant="b") on the same 100,000 pairs: 0.5090641285332795.
  constexpr std::size_t kN = 100'000;
  std::vector<double> x(kN), y(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    x[i] = static_cast<double>(i * 7919 % 1000) / 10.0;
    y[i] = static_cast<double>((i * 104729 % 997 + i * 7919 % 1000) / 50);
  }
  CHECK(*kendallTauB(x, y) == doctest::Approx(0.5090641285332795).epsilon(1e-12));
}

TEST_CASE("Mann-Whitney U: two-sided, tie-corrected, as scipy's asymptotic method") {
  struct Case {
    std::vector<double> x, y;
    double u, p;
  };
  const std::vector<Case> cases = {
      {{4, 4, 3, 4, 4, 3, 4, 4, 3, 4}, {2, 3, 2, 2, 3, 2, 3, 2, 2, 3}, 94.0, 0.0004891796190077113},
      {{1, 2, 3, 4, 5, 6, 7}, {3, 4, 5, 6, 7, 8, 9, 10}, 12.5, 0.08120887152819865},
      {{3, 3, 3, 4, 4, 2, 3, 4}, {3, 4, 3, 3, 2, 4, 3, 3, 4}, 37.0, 0.9573357432581315},
      {{1, 1, 1, 2}, {1, 2, 2, 2, 2}, 4.5, 0.15729920705028516},
      {{0.2, 0.4, 0.4, 0.9, 0.1, 0.5}, {0.3, 0.8, 0.8, 0.7, 0.6}, 8.0, 0.2331971402479267},
  };
  for (const auto& c : cases) {
    CAPTURE(c.u);
    const auto r = mannWhitneyU(c.x, c.y);
    REQUIRE(r.has_value());
    CHECK(r->u == doctest::Approx(c.u).epsilon(kTol));
    CHECK(r->p_value == doctest::Approx(c.p).epsilon(kTol));
  }
  CHECK_FALSE(mannWhitneyU({3, 3}, {3, 3, 3}).has_value());  // all tied
  CHECK_FALSE(mannWhitneyU({}, {1}).has_value());
}

TEST_CASE("95 % interval: Student's t at every n, cut to the scale") {
  // t(0.975, 4) = 2.7764451051977987 (scipy.stats.t.ppf)
  const auto small = meanInterval95({2, 3, 4, 3, 3});
  REQUIRE(small.has_value());
  CHECK(small->mean == doctest::Approx(3.0));
  CHECK(small->sd == doctest::Approx(std::sqrt(0.5)).epsilon(kTol));
  CHECK(small->high - small->mean ==
        doctest::Approx(2.7764451051977987 * std::sqrt(0.5) / std::sqrt(5.0)).epsilon(kTol));
  std::vector<double> big;
  for (int i = 0; i < 30; ++i) big.push_back(i % 4 + 1);
  const auto b = meanInterval95(big);
  REQUIRE(b.has_value());
  // t(0.975, 29) = 2.045229642132703 (scipy.stats.t.ppf), not the large-sample 1.96.
  CHECK(b->high - b->mean ==
        doctest::Approx(2.045229642132703 * b->sd / std::sqrt(30.0)).epsilon(kTol));
  CHECK_FALSE(meanInterval95({3}).has_value());
  // Two scores on [0, 1]: mean ± 12.706·sd/√2 is [−5.85, 6.85]; cut to the scale.
  const auto two = meanInterval95({0.0, 1.0}, 0.0, 1.0);
  REQUIRE(two.has_value());
  CHECK(two->mean == 0.5);
  CHECK(two->low == 0.0);
  CHECK(two->high == 1.0);
  const auto edge = meanInterval95({0.9, 1.0, 1.0, 1.0, 0.95}, 0.0, 1.0);
  REQUIRE(edge.has_value());
  CHECK(edge->high == 1.0);  // 0.97 + 0.055 would leave the scale
  CHECK(edge->low == doctest::Approx(0.97 - 2.7764451051977987 * edge->sd / std::sqrt(5.0)));
}

TEST_CASE("chi-square test of independence, as scipy.stats.chi2_contingency(correction=False)") {
  // The issue's ratings: a star level no arm received is dropped, not an error or infinity.
  const auto issue = chiSquareIndependence({{0, 0, 5, 10, 15}, {0, 3, 4, 12, 11}});
  REQUIRE(issue.has_value());
  CHECK(issue->statistic == doctest::Approx(3.9083139083139082).epsilon(kTol));
  CHECK(issue->dof == 3);
  CHECK(issue->p_value == doctest::Approx(0.27153628879603364).epsilon(kTol));
  CHECK(issue->min_expected == doctest::Approx(1.5));
  CHECK(issue->share_below_5 == doctest::Approx(0.5));
  CHECK_FALSE(issue->reliable);
  auto a = chiSquareIndependence({{10, 20, 30}, {20, 20, 20}});
  REQUIRE(a.has_value());
  CHECK(a->statistic == doctest::Approx(5.333333333333334).epsilon(kTol));
  CHECK(a->dof == 2);
  CHECK(a->p_value == doctest::Approx(0.0694834512228015).epsilon(kTol));
  auto b = chiSquareIndependence({{5, 9, 12, 20, 30}, {7, 8, 15, 18, 25}});
  REQUIRE(b.has_value());
  CHECK(b->statistic == doctest::Approx(1.2253928824766556).epsilon(kTol));
  CHECK(b->dof == 4);
  CHECK(b->p_value == doctest::Approx(0.8739004119582408).epsilon(kTol));
  auto c = chiSquareIndependence({{30, 10}, {10, 30}});
  REQUIRE(c.has_value());
  CHECK(c->statistic == doctest::Approx(20.0).epsilon(kTol));
  CHECK(c->p_value == doctest::Approx(7.744216431044088e-06).epsilon(1e-6));
  // An empty column (nobody gave 1 star) is dropped, not a division by zero.
  auto d = chiSquareIndependence({{0, 10, 20, 30}, {0, 20, 20, 20}});
  REQUIRE(d.has_value());
  CHECK(d->dof == 2);
  CHECK(d->statistic == doctest::Approx(5.333333333333334).epsilon(kTol));
  CHECK_FALSE(chiSquareIndependence({{1, 2, 3}}).has_value());
}

TEST_CASE("exact two-sided binomial test, as scipy.stats.binomtest") {
  CHECK(binomialTestTwoSided(10, 10, 1.0 / 3) ==
        doctest::Approx(1.693508780843028e-05).epsilon(kTol));
  CHECK(binomialTestTwoSided(3, 10, 1.0 / 3) == doctest::Approx(1.0));
  CHECK(binomialTestTwoSided(7, 20, 0.5) == doctest::Approx(0.26317596435546875).epsilon(kTol));
  CHECK(binomialTestTwoSided(0, 10, 0.25) == doctest::Approx(0.07604122161865237).epsilon(kTol));
  CHECK(binomialTestTwoSided(0, 0, 0.5) == 1.0);
  CHECK_THROWS_AS(binomialTestTwoSided(3, 2, 0.5), std::invalid_argument);
}
