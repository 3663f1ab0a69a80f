#include "judges/bleu.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <sstream>

#include "judges/tokenizer.hpp"

namespace assay {
namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Event withReference(std::string answer, std::optional<std::string> reference) {
  Event e;
  e.question = std::string("q");  // not `= "q"`: GCC 12 -Wrestrict false positive (PR 105329)
  e.answer = std::move(answer);
  e.reference = std::move(reference);
  return e;
}

std::unique_ptr<Judge> bleuJudge(std::int64_t max_order) {
  JudgeOptionValues o;
  o.set("max_order", max_order);
  return BleuJudge::create(o);
}

struct Golden {
  const char* hypothesis;
  std::vector<const char*> references;
  int max_order;
  double expected;
};

// Printed by tests/golden/bleu_golden.py (nltk sentence_bleu, uniform weights,
// SmoothingFunction().method1), on the same space-separated token lists.
const std::vector<Golden> kBleuGolden = {
    {"the cat sat on the mat", {"the cat is on the mat"}, 4, 0.25406637407730737},
    {"the quick brown fox jumps over the lazy dog",
     {"the quick brown fox jumps over the lazy dog"},
     4,
     1.0},
    {"the office opens at nine", {"the office opens at nine every day"}, 4, 0.6703200460356393},
    {"nine at opens office the", {"the office opens at nine"}, 4, 0.08034284189446518},
    {"red car", {"the red car is fast"}, 4, 0.07055995207471726},
    {"it is a guide to action which ensures that the military always obeys the commands of the "
     "party",
     {"it is a guide to action that ensures that the military will forever heed party commands",
      "it is the guiding principle which guarantees the military forces always being under the "
      "command of the party",
      "it is the practical guide for the army always to heed the directions of the party"},
     4,
     0.5045666840058485},
    {"the warranty covers water damage and fire damage for five full years",
     {"the warranty covers water damage for five years"},
     4,
     0.4240125351805037},
    {"the the the the the the the",
     {"the cat is on the mat", "there is a cat on the mat"},
     4,
     0.039281465090051315},
    {"the office opens at ten",
     {"the office opens today", "our office opens at nine daily"},
     4,
     0.3760603093086394},
    {"he read the book because he was interested in world history",
     {"he was interested in world history because he read the book"},
     4,
     0.7400828044922853},
    {"the plan costs thirty euros per month",
     {"the basic plan costs thirty euros a month"},
     2,
     0.5675047991270782},
    {"approved after careful review",
     {"the request was approved", "approved", "denied after review"},
     1,
     0.75},
    {"water damage is covered by warranty",
     {"the warranty covers water damage"},
     3,
     0.13572088082974534},
    {"red", {"red car", "blue sky"}, 1, 0.36787944117144233},
};

}  // namespace

TEST_CASE("BLEU: issue case, no unigram match scores 0") {
  CHECK(sentenceBleu({words("denied")}, words("approved")) == 0.0);
  CHECK(sentenceBleu({words("denied")}, words("approved"), 1) == 0.0);
  const auto v = BleuJudge({}).judge(withReference("approved", "denied"));
  CHECK(v.outcome == Outcome::kOk);
  REQUIRE(v.score.has_value());
  CHECK(*v.score == 0.0);
}

TEST_CASE("BLEU: issue case, red vs two references with max_order 1 is exp(1 - 2/1)") {
  const double s = sentenceBleu({words("red car"), words("blue sky")}, words("red"), 1);
  CHECK(std::isfinite(s));
  CHECK(s == doctest::Approx(std::exp(-1.0)).epsilon(1e-12));
  CHECK(s == doctest::Approx(0.368).epsilon(1e-3));
}

TEST_CASE("BLEU: golden values from nltk (method1 smoothing)") {
  REQUIRE(kBleuGolden.size() >= 10);
  for (const auto& g : kBleuGolden) {
    CAPTURE(g.hypothesis);
    CAPTURE(g.max_order);
    std::vector<std::vector<std::string>> refs;
    for (const char* r : g.references) {
      // The lists are simple lower-case ASCII words, so tokenize() must agree with split().
      REQUIRE(tokenize(r) == words(r));
      refs.push_back(words(r));
    }
    REQUIRE(tokenize(g.hypothesis) == words(g.hypothesis));
    const double got = sentenceBleu(refs, words(g.hypothesis), g.max_order);
    CHECK(std::abs(got - g.expected) < 1e-9);
  }
}

TEST_CASE("BLEU judge agrees with the golden values on single-reference cases") {
  int checked = 0;
  for (const auto& g : kBleuGolden) {
    if (g.references.size() != 1) continue;
    CAPTURE(g.hypothesis);
    const auto v = bleuJudge(g.max_order)->judge(withReference(g.hypothesis, g.references[0]));
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(std::abs(*v.score - g.expected) < 1e-9);
    ++checked;
  }
  CHECK(checked >= 8);
}

TEST_CASE("BLEU: brevity penalty picks the closest reference, the shorter on a tie") {
  // Hypothesis of 5 words; references of 4 and 6 words are equally close → r = 4 → BP = 1.
  // All unigrams match; use max_order 1 to isolate BP.
  const auto hyp = words("a b c d e");
  CHECK(sentenceBleu({words("a b c d"), words("a b c d e f")}, hyp, 1) == doctest::Approx(1.0));
  CHECK(sentenceBleu({words("a b c d e f"), words("a b c d")}, hyp, 1) == doctest::Approx(1.0));
  // Only a 7-word reference: BP = exp(1 - 7/5).
  CHECK(sentenceBleu({words("a b c d e f g")}, hyp, 1) ==
        doctest::Approx(std::exp(1.0 - 7.0 / 5.0)).epsilon(1e-12));
}

TEST_CASE("BLEU: method1 smoothing of empty higher orders, no division by zero") {
  // "red car" vs "the red car is fast", BLEU-4: p1 = 2/2, p2 = 1/1, p3 = p4 = 0.1/1 (no
  // trigram in a 2-word hypothesis), BP = exp(1 - 5/2).
  const double expected = std::exp(1.0 - 5.0 / 2.0) * std::pow(1.0 * 1.0 * 0.1 * 0.1, 0.25);
  const double got = sentenceBleu({words("the red car is fast")}, words("red car"), 4);
  CHECK(got == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("BLEU: empty hypothesis scores 0") {
  CHECK(sentenceBleu({words("the office opens at nine")}, {}) == 0.0);
  const auto v = BleuJudge({}).judge(withReference("", "the office opens at nine"));
  CHECK(v.outcome == Outcome::kOk);
  REQUIRE(v.score.has_value());
  CHECK(*v.score == 0.0);
}

TEST_CASE("BLEU judge: no_reference when the reference is missing or has no token") {
  for (const auto& ref : {std::optional<std::string>{}, std::optional<std::string>{""},
                          std::optional<std::string>{" - "}}) {
    const auto v = BleuJudge({}).judge(withReference("the office opens", ref));
    CHECK(v.outcome == Outcome::kNoReference);
    CHECK_FALSE(v.score.has_value());
  }
}

TEST_CASE("BLEU judge: max_order option is validated and used") {
  CHECK_THROWS_AS(bleuJudge(0), OptionError);
  CHECK_THROWS_AS(bleuJudge(9), OptionError);
  try {
    bleuJudge(0);
    FAIL("expected OptionError");
  } catch (const OptionError& e) {
    CHECK(e.key == "max_order");
  }
  CHECK_NOTHROW(bleuJudge(1));
  CHECK_NOTHROW(bleuJudge(8));
  // The default is BLEU-4: "red car" vs "the red car is fast" is 0.0705… (golden row above),
  // while BLEU-1 of the same pair is exp(1 - 5/2).
  const auto e = withReference("red car", "the red car is fast");
  REQUIRE(BleuJudge::create({})->judge(e).score.has_value());
  CHECK(std::abs(*BleuJudge::create({})->judge(e).score - 0.07055995207471726) < 1e-9);
  CHECK(*bleuJudge(1)->judge(e).score == doctest::Approx(std::exp(1.0 - 2.5)).epsilon(1e-12));
}

}  // namespace assay

TEST_CASE("BLEU: a vocabulary of 2^16 tokens or more takes the string-keyed counts, same result") {
  // Below 65,536 distinct tokens the n-grams are counted packed 16 bits an id; from it, as
  // strings of ids. Both exact: the same hypothesis scored in each regime. Hypothesis = the
  // reference with its last token changed: of N unigrams N-1 match, of the N-n+1 n-grams N-n
  // (the ones not touching the last token), BP = 1, so BLEU = prod_n ((N-n)/(N-n+1))^(1/4)
  // (with N-1 for n=1).
  for (const std::size_t n_tokens : {std::size_t{1000}, std::size_t{70000}}) {
    std::vector<std::string> ref;
    for (std::size_t i = 0; i < n_tokens; ++i) ref.push_back("t" + std::to_string(i));
    auto hyp = ref;
    hyp.back() = "changed";
    const double n = static_cast<double>(n_tokens);
    double expected = 1;
    for (int k = 1; k <= 4; ++k) expected *= std::pow((n - k) / (n - k + 1), 0.25);
    CHECK(assay::sentenceBleu({ref}, hyp, 4) == doctest::Approx(expected).epsilon(1e-12));
  }
}
