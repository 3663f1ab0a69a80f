#include "tracking/window.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

using namespace assay::stats;

TEST_CASE("scores 2, 3, 4 and a rejected 7.5e30 → mean 3.0 over 3, the rejection reported") {
  ScoreWindow w(500, 1, 4);
  CHECK(w.add(2));
  CHECK(w.add(3));
  CHECK(w.add(4));
  CHECK_FALSE(w.add(7.5e30));
  CHECK_FALSE(w.add(NAN));
  const auto s = w.summary(0.8, 1);
  REQUIRE(s.has_value());
  CHECK(s->n == 3);
  CHECK(s->mean == doctest::Approx(3.0));
  CHECK(s->distinct == 3);
}

TEST_CASE("500 verdicts with 85 % at the top score → lenient; 75 % → not") {
  for (auto [top_share, lenient] : {std::pair{0.85, true}, std::pair{0.75, false}}) {
    ScoreWindow w(500, 1, 4);
    const int top = static_cast<int>(top_share * 500);
    for (int i = 0; i < 500; ++i) w.add(i < top ? 4 : (i % 3) + 1);
    const auto s = w.summary(0.8, 100);
    REQUIRE(s.has_value());
    CHECK(s->top_share == doctest::Approx(top_share));
    CHECK(s->lenient == lenient);
    // Not enough samples: never lenient.
    CHECK_FALSE(w.summary(0.8, 1000)->lenient);
  }
}

TEST_CASE("entropy: 0 for one value, 1 for a uniform rubric, bins for [0, 1] scales") {
  ScoreWindow one(100, 1, 4), uniform(100, 1, 4), unit(100, 0, 1);
  for (int i = 0; i < 100; ++i) {
    one.add(4);
    uniform.add(i % 4 + 1);
    unit.add((i % 10) / 10.0 + 0.05);
  }
  CHECK(one.summary(0.8, 1)->entropy == doctest::Approx(0.0));
  CHECK(uniform.summary(0.8, 1)->entropy == doctest::Approx(1.0));
  CHECK(unit.summary(0.8, 1)->entropy == doctest::Approx(1.0));
  CHECK(uniform.summary(0.8, 1)->bottom_share == doctest::Approx(0.25));
}

TEST_CASE("faithfulness 4,4,3,4… then 2,3,2… → drift within one recent window") {
  DriftOptions o;
  o.baseline_size = 100;
  o.recent_size = 50;
  DriftDetector d(o);
  const int high[] = {4, 4, 3, 4};
  const int low[] = {2, 3, 2};
  for (int i = 0; i < 100; ++i) d.add(high[i % 4]);
  for (int i = 0; i < 49; ++i) d.add(high[i % 4]);
  CHECK_FALSE(d.evaluate().has_value());  // recent window not full yet
  d.add(4);
  CHECK_FALSE(d.evaluate()->drift);
  for (int i = 0; i < 50; ++i) d.add(low[i % 3]);  // one recent window of the shift
  const auto r = d.evaluate();
  REQUIRE(r.has_value());
  CHECK(r->drift);
  CHECK(r->baseline_mean == doctest::Approx(3.75));
  CHECK(r->recent_mean < 2.5);
  CHECK(r->p_value < 1e-6);
}

TEST_CASE("identical distributions: drift stays 0 in at least 99 of 100 seeded runs") {
  int false_alarms = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed);
    std::discrete_distribution<int> score({0.1, 0.2, 0.4, 0.3});  // levels 1..4
    DriftOptions o;
    o.baseline_size = 200;
    o.recent_size = 100;
    o.alpha = 0.01;
    DriftDetector d(o);
    for (int i = 0; i < 300; ++i) d.add(score(rng) + 1);
    const auto r = d.evaluate();
    REQUIRE(r.has_value());
    false_alarms += r->drift;
  }
  MESSAGE("false alarms: " << false_alarms << " of 100");
  CHECK(false_alarms <= 1);
}

TEST_CASE("rolling baseline and a baseline frozen from a file") {
  DriftOptions o;
  o.baseline_size = 20;
  o.recent_size = 20;
  o.rolling = true;
  DriftDetector rolling(o);
  for (int i = 0; i < 100; ++i) rolling.add(i < 60 ? 4 : (i % 2 ? 2 : 3));
  // The last 40 alternate 2 and 3: the rolling baseline has caught up, no drift.
  const auto r = rolling.evaluate();
  REQUIRE(r.has_value());
  CHECK_FALSE(r->drift);
  CHECK(r->baseline_mean == doctest::Approx(2.5));
  DriftDetector frozen(o);
  frozen.setBaseline(std::vector<double>(20, 4.0));
  for (int i = 0; i < 20; ++i) frozen.add(i % 2 ? 2 : 1);
  const auto f = frozen.evaluate();
  REQUIRE(f.has_value());
  CHECK(f->drift);
  // Every score tied (baseline and recent all 4): the test is undefined, not "no drift".
  DriftDetector tied(o);
  tied.setBaseline(std::vector<double>(20, 4.0));
  for (int i = 0; i < 20; ++i) tied.add(4);
  CHECK_FALSE(tied.evaluate().has_value());
}

TEST_CASE("drift windows as durations: the last hour against a frozen first 6 hours") {
  DriftOptions o;
  o.baseline_seconds = 6 * 3600;
  o.recent_seconds = 3600;
  DriftDetector d(o);
  const int high[] = {4, 4, 3, 4};
  const int low[] = {2, 3, 2};
  double t = 0;
  // One score a minute: 6 h of 4,4,3,4 (the frozen baseline), then 1 h more of the same.
  for (int i = 0; i < 7 * 60; ++i, t += 60) d.add(high[i % 4], t);
  auto r = d.evaluate(t);
  REQUIRE(r.has_value());
  CHECK_FALSE(r->drift);
  CHECK(r->baseline_mean == doctest::Approx(3.75));
  // Half an hour of 2,3,2… : the recent hour is half shifted.
  for (int i = 0; i < 30; ++i, t += 60) d.add(low[i % 3], t);
  r = d.evaluate(t);
  REQUIRE(r.has_value());
  CHECK(r->drift);
  // Nothing for two hours: the recent hour is empty, so no verdict rather than a stale one.
  CHECK_FALSE(d.evaluate(t + 7200).has_value());
  // A recent window with fewer than kMinDurationScores scores is not evaluated.
  for (int i = 0; i < 19; ++i) d.add(4, t + 7200 + i);
  CHECK_FALSE(d.evaluate(t + 7220).has_value());
  d.add(4, t + 7220);
  CHECK(d.evaluate(t + 7220).has_value());
}

TEST_CASE("rolling duration baseline: the 6 hours before the recent hour") {
  DriftOptions o;
  o.baseline_seconds = 6 * 3600;
  o.recent_seconds = 3600;
  o.rolling = true;
  DriftDetector d(o);
  double t = 0;
  for (int i = 0; i < 10 * 60; ++i, t += 60) d.add(i < 3 * 60 ? 1 : (i % 2 ? 4 : 3), t);
  // The first 3 h (all 1s) are older than the 6 h baseline + 1 h recent: forgotten.
  const auto r = d.evaluate(t);
  REQUIRE(r.has_value());
  CHECK(r->baseline_mean == doctest::Approx(3.5));
  CHECK_FALSE(r->drift);
}
