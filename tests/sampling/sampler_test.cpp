#include "sampling/sampler.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "sampling/bounded_queue.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {
std::vector<int> readIndices(const std::string& name) {
  std::ifstream in(std::string(test::kTestDataDir) + "/sampling/" + name);
  REQUIRE(in.good());
  std::vector<int> out;
  for (int i; in >> i;) out.push_back(i);
  return out;
}
}  // namespace

TEST_CASE("XXH3_64 of the id agrees with python3-xxhash") {
  // Values printed by tests/golden/sampling_golden.py (xxhash.xxh3_64_intdigest).
  CHECK(sampleHash("req-0") == 10287611019506163780ULL);
  CHECK(sampleHash("") == 3244421341483603138ULL);
}

TEST_CASE("rate 0.05 over req-0 … req-99999 matches the independent golden list") {
  const auto golden = readIndices("golden_sampled_rate005.txt");
  Sampler s(0.05, {});
  std::vector<int> ours;
  for (int i = 0; i < 100000; ++i) {
    if (s.sampled(sampleHash("req-" + std::to_string(i)), "", "")) ours.push_back(i);
  }
  CHECK(ours.size() == golden.size());
  CHECK(ours == golden);
  // Binomial(100000, 0.05): mean 5000, sigma 68.9; within 4 sigma.
  const double sigma = std::sqrt(100000 * 0.05 * 0.95);
  CHECK(std::abs(static_cast<double>(ours.size()) - 5000.0) < 4 * sigma);
}

TEST_CASE("nested judge rate: a judge with rate 0.2 sees a golden subset of the sampled events") {
  const auto golden = readIndices("golden_nested_rate005_r02.txt");
  Sampler s(0.05, {});
  std::vector<int> ours;
  for (int i = 0; i < 100000; ++i) {
    const auto h = sampleHash("req-" + std::to_string(i));
    const bool judged = Sampler::judgeRuns(h, 0.05, 0.2);
    if (judged) {
      CHECK(s.sampled(h, "", ""));  // subset of the sampled events
      ours.push_back(i);
    }
  }
  CHECK(ours == golden);
}

TEST_CASE("thresholds at the edges") {
  CHECK(thresholdFor(1.0).admits(~0ULL));
  CHECK(thresholdFor(2.0).admits(~0ULL));
  CHECK_FALSE(thresholdFor(0.0).admits(0));
  CHECK_FALSE(thresholdFor(-1.0).admits(0));
  CHECK_FALSE(thresholdFor(std::nan("")).admits(0));
  // 0.5 × 2^64 = 2^63 exactly: h = 2^63 − 1 is in, 2^63 is out.
  CHECK(thresholdFor(0.5).admits((1ULL << 63) - 1));
  CHECK_FALSE(thresholdFor(0.5).admits(1ULL << 63));
  // A tiny rate: 2^-60 × 2^64 = 16 → h 15 in, 16 out.
  CHECK(thresholdFor(std::ldexp(1.0, -60)).admits(15));
  CHECK_FALSE(thresholdFor(std::ldexp(1.0, -60)).admits(16));
}

TEST_CASE("the first matching rule by tenant/app decides the rate") {
  Sampler s(0.05, {{"acme", "", 0.10}, {"", "search", 0.5}, {"acme", "search", 0.9}});
  CHECK(s.rateFor("acme", "search") == 0.10);  // first match wins, not the most specific
  CHECK(s.rateFor("globex", "search") == 0.5);
  CHECK(s.rateFor("globex", "chat") == 0.05);
  CHECK(s.hasRules());
  // maybeSampled uses the largest rate (0.9): anything it rejects no rule can sample.
  int rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto h = sampleHash("id-" + std::to_string(i));
    if (!s.maybeSampled(h)) {
      ++rejected;
      CHECK_FALSE(s.sampled(h, "acme", "search"));
      CHECK_FALSE(s.sampled(h, "globex", "search"));
      CHECK_FALSE(s.sampled(h, "x", "y"));
    }
  }
  CHECK(rejected > 1000);  // ~10 % of 20000
  CHECK(rejected < 3000);
}

TEST_CASE("bounded queue drops the newest when full and drains after close") {
  BoundedQueue<int> q(2);
  int a = 1, b = 2, c = 3;
  CHECK(q.tryPush(a));
  CHECK(q.tryPush(b));
  CHECK_FALSE(q.tryPush(c));
  CHECK(c == 3);  // refused item untouched
  CHECK(q.size() == 2);
  q.close();
  CHECK_FALSE(q.tryPush(c));
  CHECK(q.pop() == 1);
  CHECK(q.pop() == 2);
  CHECK_FALSE(q.pop().has_value());
}
