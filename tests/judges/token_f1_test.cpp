#include "judges/token_f1.hpp"

#include <doctest/doctest.h>

#include <cmath>

namespace assay {
namespace {

using Tokens = std::vector<std::string>;

Event withReference(std::string answer, std::optional<std::string> reference) {
  Event e;
  e.question = std::string("q");  // not `= "q"`: GCC 12 -Wrestrict false positive (PR 105329)
  e.answer = std::move(answer);
  e.reference = std::move(reference);
  return e;
}

struct Golden {
  const char* prediction;  // the answer
  const char* truth;       // the reference
  double expected;
};

// Printed by tests/golden/token_f1_golden.py (SQuAD v2.0 evaluate script's compute_f1).
const Golden kTokenF1Golden[] = {
    {"The Eiffel Tower is in Paris.", "Paris", 0.33333333333333337},
    {"a cat and the dog", "The dog and a cat", 1.0},
    {"the the cat cat cat", "cat sat on the mat", 0.28571428571428575},
    {"Don't worry, it's fine!", "dont worry its fine", 1.0},
    {"Approximately 1,250 employees.", "1,250 employees", 0.8},
    {"Denver Broncos", "Carolina Panthers", 0.0},
    {"PARIS, France", "paris france", 1.0},
    {"An apple a day keeps the doctor away", "an apple every day keeps doctors away",
     0.7272727272727272},
    {"The warranty lasts five years and covers water damage.",
     "The warranty covers water damage for five years.", 0.7999999999999999},
    {"It was signed in 1998, in Kyoto (Japan).", "Kyoto, 1998", 0.4},
    {"New York, New York", "new york city", 0.5714285714285715},
    {"the", "Paris", 0.0},
};

}  // namespace

TEST_CASE("squadTokens lower-cases, strips punctuation and drops a/an/the") {
  CHECK(squadTokens("The Eiffel Tower, a landmark!") == Tokens{"eiffel", "tower", "landmark"});
  CHECK(squadTokens("An apple and THE pear") == Tokens{"apple", "and", "pear"});
  // Only whole words are articles: "theory", "another", "anthem" stay.
  CHECK(squadTokens("theory another anthem a1") == Tokens{"theory", "another", "anthem", "a1"});
  CHECK(squadTokens("the a an").empty());
  CHECK(squadTokens("").empty());
}

TEST_CASE("tokenF1 uses multiset overlap") {
  // prediction {cat×3}, truth {cat, sat, on, mat}: one common token → P 1/3, R 1/4.
  const double p = 1.0 / 3, r = 1.0 / 4;
  CHECK(tokenF1(Tokens{"cat", "cat", "cat"}, Tokens{"cat", "sat", "on", "mat"}) ==
        doctest::Approx(2 * p * r / (p + r)).epsilon(1e-12));
  // two common "cat"s when both sides have two.
  CHECK(tokenF1(Tokens{"cat", "cat", "dog"}, Tokens{"cat", "cat"}) ==
        doctest::Approx(2 * (2.0 / 3) * 1.0 / (2.0 / 3 + 1.0)).epsilon(1e-12));
  CHECK(tokenF1(Tokens{"x", "y"}, Tokens{"y", "x"}) == 1.0);
  CHECK(tokenF1(Tokens{"x"}, Tokens{"y"}) == 0.0);
}

TEST_CASE("token F1: golden values from the SQuAD formula") {
  for (const auto& g : kTokenF1Golden) {
    CAPTURE(g.prediction);
    CAPTURE(g.truth);
    const double got = tokenF1(squadTokens(g.prediction), squadTokens(g.truth));
    CHECK(std::abs(got - g.expected) < 1e-12);
    // The judge computes the same number.
    const auto v = TokenF1Judge{}.judge(withReference(g.prediction, g.truth));
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(std::abs(*v.score - g.expected) < 1e-12);
  }
}

TEST_CASE("token F1: CJK is compared per character") {
  // 会议改到周三 vs 会议改到周四: 5 of 6 characters in common.
  const auto v = TokenF1Judge{}.judge(withReference("会议改到周三", "会议改到周四"));
  REQUIRE(v.score.has_value());
  CHECK(*v.score == doctest::Approx(5.0 / 6.0).epsilon(1e-12));
}

TEST_CASE("token F1: empty answer scores 0 without exception") {
  CHECK(tokenF1({}, Tokens{"paris"}) == 0.0);
  CHECK(tokenF1(Tokens{"paris"}, {}) == 0.0);
  CHECK(tokenF1({}, {}) == 0.0);
  for (const char* answer : {"", "  ", "the", "..."}) {
    CAPTURE(answer);
    Verdict v;
    CHECK_NOTHROW(v = TokenF1Judge{}.judge(withReference(answer, "Paris")));
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(*v.score == 0.0);
  }
}

TEST_CASE("token F1 judge: no_reference when the reference is missing or only articles") {
  for (const auto& ref : {std::optional<std::string>{}, std::optional<std::string>{""},
                          std::optional<std::string>{"The."}}) {
    CAPTURE(ref.value_or("<none>"));
    const auto v = TokenF1Judge{}.judge(withReference("Paris", ref));
    CHECK(v.outcome == Outcome::kNoReference);
    CHECK_FALSE(v.score.has_value());
  }
}

}  // namespace assay
