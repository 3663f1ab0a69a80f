#include "judges/retrieval.hpp"

#include <doctest/doctest.h>

#include <cmath>

namespace assay {
namespace {

using Ids = std::vector<std::string>;

Event retrievalEvent(const Ids& retrieved, std::optional<Ids> relevant) {
  Event e;
  e.question = "q";
  e.answer = "a";
  for (const auto& id : retrieved) e.contexts.push_back(Context{id, "text of " + id, ""});
  e.relevant_context_ids = std::move(relevant);
  return e;
}

template <typename J>
std::unique_ptr<Judge> withK(std::int64_t k) {
  JudgeOptionValues o;
  o.set("k", k);
  return J::create(o);
}

double discount(int rank) { return 1.0 / std::log2(rank + 1.0); }

struct NdcgGolden {
  Ids retrieved;
  Ids relevant;
  int k;
  double expected;
};

// Printed by tests/golden/ndcg_golden.py (sklearn.metrics.ndcg_score). Every relevant id is in
// the retrieved list: sklearn's ideal DCG only sees the scored (retrieved) items, while ours
// counts every ground-truth id, so they agree only then (see "differs from sklearn" below).
const std::vector<NdcgGolden> kNdcgGolden = {
    {{"d1", "d2", "d3", "d4", "d5"}, {"d2", "d4"}, 5, 0.6509209298071323},
    {{"d1", "d2", "d3", "d4", "d5"}, {"d1"}, 3, 1.0},
    {{"d1", "d2", "d3", "d4", "d5"}, {"d5"}, 5, 0.38685280723454163},
    {{"d1", "d2", "d3", "d4", "d5"}, {"d3", "d5", "d1"}, 5, 0.8854598815714875},
    {{"d1", "d2", "d3", "d4", "d5"}, {"d3", "d5", "d1"}, 3, 0.7039180890341348},
    {{"d1", "d2", "d3", "d4", "d5", "d6"}, {"d6", "d2"}, 4, 0.38685280723454163},
    {{"a", "b", "c"}, {"c", "b"}, 10, 0.6934264036172709},
    {{"a", "b", "c", "d", "e", "f", "g", "h"}, {"b", "e", "g", "h"}, 8, 0.6505998846696008},
};

}  // namespace

TEST_CASE("hit rate at k") {
  const Ids retrieved{"d1", "d2", "d3", "d4", "d5"};
  CHECK(retrievalScore(RetrievalMetric::kHitRate, retrieved, {"d3"}, 5) == 1.0);
  CHECK(retrievalScore(RetrievalMetric::kHitRate, retrieved, {"d3"}, 3) == 1.0);
  CHECK(retrievalScore(RetrievalMetric::kHitRate, retrieved, {"d3"}, 2) == 0.0);  // cut off
  CHECK(retrievalScore(RetrievalMetric::kHitRate, retrieved, {"x", "d1"}, 1) == 1.0);
  CHECK(retrievalScore(RetrievalMetric::kHitRate, retrieved, {"x", "y"}, 5) == 0.0);
  CHECK(retrievalScore(RetrievalMetric::kHitRate, {}, {"d1"}, 5) == 0.0);
}

TEST_CASE("MRR at k") {
  const Ids retrieved{"d1", "d2", "d3", "d4", "d5"};
  CHECK(retrievalScore(RetrievalMetric::kMrr, retrieved, {"d1"}, 5) == 1.0);
  CHECK(retrievalScore(RetrievalMetric::kMrr, retrieved, {"d3"}, 5) ==
        doctest::Approx(1.0 / 3).epsilon(1e-12));
  // The first relevant rank counts, not the best-ranked relevant id in the list order given.
  CHECK(retrievalScore(RetrievalMetric::kMrr, retrieved, {"d4", "d2"}, 5) == 0.5);
  CHECK(retrievalScore(RetrievalMetric::kMrr, retrieved, {"d5"}, 5) == 0.2);
  CHECK(retrievalScore(RetrievalMetric::kMrr, retrieved, {"d5"}, 4) == 0.0);  // beyond k
  CHECK(retrievalScore(RetrievalMetric::kMrr, retrieved, {"zz"}, 5) == 0.0);
}

TEST_CASE("nDCG at k, hand-computed") {
  const Ids retrieved{"d1", "d2", "d3", "d4", "d5"};
  // Relevant at ranks 2 and 4, two relevant in total: DCG = 1/log2 3 + 1/log2 5,
  // IDCG = 1 + 1/log2 3.
  CHECK(retrievalScore(RetrievalMetric::kNdcg, retrieved, {"d2", "d4"}, 5) ==
        doctest::Approx((discount(2) + discount(4)) / (discount(1) + discount(2))).epsilon(1e-12));
  // Perfect ranking.
  CHECK(retrievalScore(RetrievalMetric::kNdcg, retrieved, {"d1", "d2"}, 5) ==
        doctest::Approx(1.0).epsilon(1e-12));
  // k = 1 with the relevant chunk at rank 2: nothing in the top 1.
  CHECK(retrievalScore(RetrievalMetric::kNdcg, retrieved, {"d2"}, 1) == 0.0);
  // More relevant ids than k: the ideal has k hits. Relevant d1,d3 in top 2 → only d1 counts.
  CHECK(retrievalScore(RetrievalMetric::kNdcg, retrieved, {"d1", "d3", "d5"}, 2) ==
        doctest::Approx(discount(1) / (discount(1) + discount(2))).epsilon(1e-12));
  // A chunk retrieved twice counts once.
  CHECK(retrievalScore(RetrievalMetric::kNdcg, {"d1", "d1", "d2"}, {"d1"}, 3) ==
        doctest::Approx(1.0).epsilon(1e-12));
  // Duplicate ground-truth ids do not inflate the ideal DCG.
  CHECK(retrievalScore(RetrievalMetric::kNdcg, retrieved, {"d1", "d1"}, 5) ==
        doctest::Approx(1.0).epsilon(1e-12));
}

TEST_CASE("nDCG: golden values from sklearn.metrics.ndcg_score") {
  for (const auto& g : kNdcgGolden) {
    CAPTURE(g.k);
    CAPTURE(g.expected);
    const double got = retrievalScore(RetrievalMetric::kNdcg, g.retrieved, g.relevant, g.k);
    CHECK(std::abs(got - g.expected) < 1e-12);
    const auto v = withK<NdcgJudge>(g.k)->judge(retrievalEvent(g.retrieved, g.relevant));
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(std::abs(*v.score - g.expected) < 1e-12);
  }
}

TEST_CASE("nDCG differs from sklearn when a relevant id was never retrieved") {
  // retrieved d1 d2 d3, relevant {d2, x9}, k 3. sklearn only scores the retrieved items, so
  // its ideal DCG is 1 (one relevant among them) and it would report 1/log2 3 = 0.6309.
  // Our ideal DCG counts both relevant ids (min(k, |relevant|) = 2): 1 + 1/log2 3, so the
  // missed chunk is a retrieval fault: 0.6309 / 1.6309 = 0.38685.
  const double ours = retrievalScore(RetrievalMetric::kNdcg, {"d1", "d2", "d3"}, {"d2", "x9"}, 3);
  const double hand = discount(2) / (discount(1) + discount(2));
  CHECK(ours == doctest::Approx(hand).epsilon(1e-12));
  CHECK(ours == doctest::Approx(0.386852807234).epsilon(1e-9));
  CHECK(ours != doctest::Approx(discount(2)));  // sklearn's 0.6309 is not what we report

  // Fewer chunks retrieved than relevant ids: both retrieved chunks are relevant, so sklearn
  // (ideal = the two scored items) reports 1.0; a third relevant chunk was never retrieved, so
  // our ideal DCG has min(k, 3) = 3 hits: (1 + 1/log2 3) / (1 + 1/log2 3 + 1/2) = 0.76536.
  const double short_list =
      retrievalScore(RetrievalMetric::kNdcg, {"d1", "d2"}, {"d1", "d2", "d3"}, 5);
  CHECK(short_list ==
        doctest::Approx((discount(1) + discount(2)) / (discount(1) + discount(2) + discount(3)))
            .epsilon(1e-12));
  CHECK(short_list == doctest::Approx(0.765361).epsilon(1e-6));
}

TEST_CASE("retrieval judges on events: defaults k = 5") {
  const auto e = retrievalEvent({"d1", "d2", "d3", "d4", "d5", "d6"}, Ids{"d6"});
  // d6 is at rank 6, beyond the default k of 5.
  for (auto* create : {&HitRateJudge::create, &MrrJudge::create, &NdcgJudge::create}) {
    const auto v = create({})->judge(e);
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(*v.score == 0.0);
  }
  const auto e3 = retrievalEvent({"d1", "d2", "d3"}, Ids{"d3"});
  CHECK(*HitRateJudge::create({})->judge(e3).score == 1.0);
  CHECK(*MrrJudge::create({})->judge(e3).score == doctest::Approx(1.0 / 3).epsilon(1e-12));
  CHECK(*NdcgJudge::create({})->judge(e3).score == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(*withK<HitRateJudge>(2)->judge(e3).score == 0.0);
  CHECK(*withK<MrrJudge>(2)->judge(e3).score == 0.0);
}

TEST_CASE("retrieval judges: outcomes no_ground_truth and no_context_ids") {
  const std::unique_ptr<Judge> judges[] = {HitRateJudge::create({}), MrrJudge::create({}),
                                           NdcgJudge::create({})};
  for (const auto& j : judges) {
    const auto missing = j->judge(retrievalEvent({"d1"}, std::nullopt));
    CHECK(missing.outcome == Outcome::kNoGroundTruth);
    CHECK_FALSE(missing.score.has_value());
    CHECK(outcomeName(missing.outcome) == "no_ground_truth");

    const auto empty = j->judge(retrievalEvent({"d1"}, Ids{}));
    CHECK(empty.outcome == Outcome::kNoGroundTruth);
    CHECK_FALSE(empty.score.has_value());

    Event plain;  // contexts given as plain strings: no ids to match
    plain.contexts = {Context{"", "some text", ""}, Context{"", "more text", ""}};
    plain.relevant_context_ids = Ids{"d1"};
    const auto v = j->judge(plain);
    CHECK(v.outcome == Outcome::kNoContextIds);
    CHECK_FALSE(v.score.has_value());
    CHECK(outcomeName(v.outcome) == "no_context_ids");

    // Empty contexts with ground truth: the retriever found nothing, a real fault → 0.
    const auto nothing = j->judge(retrievalEvent({}, Ids{"d1"}));
    CHECK(nothing.outcome == Outcome::kOk);
    REQUIRE(nothing.score.has_value());
    CHECK(*nothing.score == 0.0);
  }
}

TEST_CASE("retrieval judges: k must be at least 1") {
  for (auto* create : {&HitRateJudge::create, &MrrJudge::create, &NdcgJudge::create}) {
    for (std::int64_t bad : {0, -3}) {
      JudgeOptionValues o;
      o.set("k", bad);
      try {
        create(o);
        FAIL("expected OptionError for k = " << bad);
      } catch (const OptionError& e) {
        CHECK(e.key == "k");
      }
    }
  }
}

}  // namespace assay
