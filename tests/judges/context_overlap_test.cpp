#include "judges/context_overlap.hpp"

#include <doctest/doctest.h>

#include <cstdint>

#include "judges/checks.hpp"
#include "judges/tokenizer.hpp"

namespace assay {
namespace {

Event withContexts(std::string answer, const std::vector<std::string_view>& contexts) {
  Event e;
  e.question = "What does the plan cost?";
  e.answer = std::move(answer);
  for (std::size_t i = 0; i < contexts.size(); ++i)
    e.contexts.push_back(Context{"doc-" + std::to_string(i + 1), std::string(contexts[i]), ""});
  return e;
}

Event withQuestion(std::string question, std::string answer) {
  Event e;
  e.question = std::move(question);
  e.answer = std::move(answer);
  return e;
}

// Both weights at once (numbers and names), as the tests below were written for.
std::unique_ptr<Judge> overlapJudge(double weight) {
  JudgeOptionValues o;
  o.set("number_weight", weight);
  o.set("name_weight", weight);
  return ContextOverlapJudge::create(o);
}

const std::vector<std::string_view> kPlanContext = {"The Basic plan costs 30 euros per month."};

}  // namespace

TEST_CASE("lightStem strips common suffixes of long tokens only") {
  CHECK(lightStem("leukemias") == "leukemia");
  CHECK(lightStem("covered") == "cover");
  CHECK(lightStem("covers") == "cover");
  CHECK(lightStem("covering") == "cover");
  CHECK(lightStem("studies") == "study");
  CHECK(lightStem("study") == "study");
  // A final -e goes after the suffix, so a word meets its inflections.
  CHECK(lightStem("expire") == "expir");
  CHECK(lightStem("expires") == "expir");
  CHECK(lightStem("expired") == "expir");
  CHECK(lightStem("prices") == lightStem("price"));
  CHECK(lightStem("prés") == "prés");  // 4 code points (5 bytes): unchanged
  CHECK(lightStem("quickly") == "quick");
  CHECK(lightStem("class") == "class");  // "ss" is not a plural
  CHECK(lightStem("process") == "process");
  CHECK(lightStem("cats") == "cats");  // 4 characters or fewer: unchanged
  CHECK(lightStem("bed") == "bed");
  CHECK(lightStem("") == "");
}

TEST_CASE("context_overlap: issue case, empty contexts are no_context and context_count fails") {
  Event e;
  e.question = "How long is the warranty?";
  e.answer = "The warranty lasts five years and covers water damage.";
  // e.contexts is empty: retrieval returned nothing.

  const auto overlap = ContextOverlapJudge::create({})->judge(e);
  CHECK(overlap.outcome == Outcome::kNoContext);
  CHECK(outcomeName(overlap.outcome) == "no_context");
  CHECK_FALSE(overlap.score.has_value());  // never a faithfulness of 1

  const auto count = ContextCountJudge::create({})->judge(e);  // default min 1
  CHECK(count.outcome == Outcome::kOk);
  REQUIRE(count.passed.has_value());
  CHECK_FALSE(*count.passed);
  REQUIRE(count.score.has_value());
  CHECK(*count.score == 0.0);
}

TEST_CASE("context_overlap: contexts whose texts are all empty are no_context too") {
  Event e = withContexts("The warranty lasts five years.", {"", ""});
  const auto v = ContextOverlapJudge::create({})->judge(e);
  CHECK(v.outcome == Outcome::kNoContext);
  CHECK_FALSE(v.score.has_value());
}

TEST_CASE("context_overlap: a hallucinated number scores lower than the right one") {
  const auto judge = ContextOverlapJudge::create({});
  const auto right = judge->judge(withContexts("The plan costs 30 euros.", kPlanContext));
  const auto wrong = judge->judge(withContexts("The plan costs 45 euros.", kPlanContext));
  REQUIRE(right.score.has_value());
  REQUIRE(wrong.score.has_value());
  CHECK(*right.score == 1.0);
  // plan, cost, euro supported (weight 1 each); 45 unsupported (weight 4): 3 / 7.
  CHECK(*wrong.score == doctest::Approx(3.0 / 7.0).epsilon(1e-12));
  CHECK(*wrong.score < *right.score);
  CHECK(wrong.evidence == "not in any context: 45");
  CHECK(right.evidence.empty());

  const auto d = contextOverlap("The plan costs 45 euros.", kPlanContext, {4.0, 4.0});
  CHECK(d.supported_weight == 3.0);
  CHECK(d.total_weight == 7.0);
  CHECK(d.unsupported_specific == std::vector<std::string>{"45"});
}

TEST_CASE("context_overlap: number_weight sets how much a wrong figure costs") {
  const auto e = withContexts("The plan costs 45 euros.", kPlanContext);
  CHECK(*overlapJudge(1.0)->judge(e).score == doctest::Approx(3.0 / 4.0).epsilon(1e-12));
  CHECK(*overlapJudge(4.0)->judge(e).score == doctest::Approx(3.0 / 7.0).epsilon(1e-12));
  CHECK(*overlapJudge(10.0)->judge(e).score == doctest::Approx(3.0 / 13.0).epsilon(1e-12));
  // The default number weight is 4.
  CHECK(*ContextOverlapJudge::create({})->judge(e).score ==
        doctest::Approx(3.0 / 7.0).epsilon(1e-12));
  // An integer option value converts.
  JudgeOptionValues o;
  o.set("number_weight", std::int64_t{1});
  CHECK(*ContextOverlapJudge::create(o)->judge(e).score ==
        doctest::Approx(3.0 / 4.0).epsilon(1e-12));
}

TEST_CASE(
    "context_overlap: a capitalised word mid-sentence is a name, at sentence start it is not") {
  const std::vector<std::string_view> ctx = {"The contract was signed by Dupont in Lyon."};
  // contract, sign(ed), Lyon supported; Martin (a name, weight 4) not: (1 + 1 + 4) / 10.
  const auto d = contextOverlap("The contract was signed by Martin in Lyon.", ctx, {4.0, 4.0});
  CHECK(d.score == doctest::Approx(0.6).epsilon(1e-12));
  CHECK(d.unsupported_specific == std::vector<std::string>{"martin"});

  const std::vector<std::string_view> water = {"The policy covers water damage."};
  // "Nobody" starts the sentence: an ordinary word of weight 1 → 3 / 4.
  CHECK(contextOverlap("Nobody covers water damage.", water, {4.0, 4.0}).score ==
        doctest::Approx(0.75).epsilon(1e-12));
  // The same word mid-sentence and capitalised weighs 4 → 3 / 7.
  CHECK(contextOverlap("Water damage covers Nobody.", water, {4.0, 4.0}).score ==
        doctest::Approx(3.0 / 7.0).epsilon(1e-12));
}

TEST_CASE("context_overlap: support may come from any context, numbers normalised") {
  const std::vector<std::string_view> ctx = {"The warranty lasts five years.",
                                             "Water damage is covered by the warranty."};
  const auto v = ContextOverlapJudge::create({})->judge(
      withContexts("The warranty lasts five years and covers water damage.", ctx));
  REQUIRE(v.score.has_value());
  CHECK(*v.score == 1.0);

  // "1,250" and "1250" are the same figure; "company" is unsupported (weight 1).
  const auto d = contextOverlap("The company has 1,250 employees.",
                                {"It has 1250 employees in total."}, {4.0, 4.0});
  CHECK(d.score == doctest::Approx(5.0 / 6.0).epsilon(1e-12));
  CHECK(d.unsupported_specific.empty());
}

TEST_CASE("context_overlap: CJK answers are compared per character") {
  const auto d = contextOverlap("会议改到周三", {"会议改到周四"}, {4.0, 4.0});
  CHECK(d.total_weight == 6.0);
  CHECK(d.supported_weight == 5.0);
  CHECK(d.score == doctest::Approx(5.0 / 6.0).epsilon(1e-12));
}

TEST_CASE("context_overlap: empty answer or only stopwords is empty_input") {
  const auto judge = ContextOverlapJudge::create({});
  for (const char* answer : {"", "   ", "It is what it is.", "?!"}) {
    CAPTURE(answer);
    const auto v = judge->judge(withContexts(answer, kPlanContext));
    CHECK(v.outcome == Outcome::kEmptyInput);
    CHECK_FALSE(v.score.has_value());
  }
  CHECK(contextOverlap("", kPlanContext, {4.0, 4.0}).total_weight == 0.0);
}

TEST_CASE("context_overlap: weights must be within [1, 100]") {
  for (const char* key : {"number_weight", "name_weight"}) {
    for (double bad : {0.5, 0.0, -1.0, 101.0}) {
      CAPTURE(bad);
      JudgeOptionValues o;
      o.set(key, bad);
      try {
        ContextOverlapJudge::create(o);
        FAIL("expected OptionError");
      } catch (const OptionError& e) {
        CHECK(e.key == key);
      }
    }
  }
  CHECK_NOTHROW(overlapJudge(1.0));
  CHECK_NOTHROW(overlapJudge(100.0));
}

TEST_CASE("question_overlap: share of the question's content words the answer repeats") {
  const auto judge = QuestionOverlapJudge::create({});
  const std::string q = "What is the warranty period for the laptop?";  // warranty period laptop
  const auto full = judge->judge(withQuestion(q, "The laptop warranty period is two years."));
  REQUIRE(full.score.has_value());
  CHECK(*full.score == 1.0);

  const auto partial = judge->judge(withQuestion(q, "The laptop has a two year guarantee."));
  REQUIRE(partial.score.has_value());
  CHECK(*partial.score == doctest::Approx(1.0 / 3.0).epsilon(1e-12));

  const auto none = judge->judge(withQuestion(q, "It lasts two years."));
  REQUIRE(none.score.has_value());
  CHECK(*none.score == 0.0);

  // Repeated question words count once; stemming matches "periods" with "period".
  const auto stems =
      judge->judge(withQuestion("Laptop laptop warranty periods?", "Laptop period."));
  REQUIRE(stems.score.has_value());
  CHECK(*stems.score == doctest::Approx(2.0 / 3.0).epsilon(1e-12));

  // CJK: 会 议 改 到 哪 天, the answer repeats four of the six.
  const auto cjk = judge->judge(withQuestion("会议改到哪天", "会议改到周三"));
  REQUIRE(cjk.score.has_value());
  CHECK(*cjk.score == doctest::Approx(4.0 / 6.0).epsilon(1e-12));
}

TEST_CASE("question_overlap: empty answer scores 0, question without content is empty_input") {
  const auto judge = QuestionOverlapJudge::create({});
  const auto empty_answer = judge->judge(withQuestion("What is the warranty period?", ""));
  CHECK(empty_answer.outcome == Outcome::kOk);
  REQUIRE(empty_answer.score.has_value());
  CHECK(*empty_answer.score == 0.0);

  for (const char* q : {"", "What is it?", "???"}) {
    CAPTURE(q);
    const auto v = judge->judge(withQuestion(q, "The warranty lasts five years."));
    CHECK(v.outcome == Outcome::kEmptyInput);
    CHECK_FALSE(v.score.has_value());
  }
}

TEST_CASE("context_overlap: an inflected word is supported by its base form") {
  const auto d = contextOverlap("The warranty expires in 2027.",
                                {"The warranty will expire in 2027."}, {4.0, 4.0});
  CHECK(d.score == doctest::Approx(1.0));
}

TEST_CASE("context_overlap: defaults: numbers weigh 4, names 1 (name_weight)") {
  const std::vector<std::string_view> ctx = {"The contract was signed by Dupont in Lyon."};
  // contract, sign(ed), Lyon supported; Martin (weight 1 by default) not: 3 / 4.
  const auto d = ContextOverlapJudge::create({})->judge(
      withContexts("The contract was signed by Martin in Lyon.", ctx));
  CHECK(*d.score == doctest::Approx(3.0 / 4.0).epsilon(1e-12));
  // In 1999 (4) unsupported as well: 3 / 8.
  CHECK(*ContextOverlapJudge::create({})
             ->judge(withContexts("The contract was signed by Martin in Lyon in 1999.", ctx))
             .score == doctest::Approx(3.0 / 8.0).epsilon(1e-12));
  CHECK(contextOverlap("Signed in 1999 by Martin.", ctx, {4.0, 2.0}).unsupported_specific ==
        std::vector<std::string>{"1999", "martin"});
}

TEST_CASE("context_overlap: citation markers are not unsupported numbers") {
  const std::vector<std::string_view> ctx = {"Paris is the capital of France."};
  const auto cited = contextOverlap("The capital of France is Paris [1].", ctx, {4.0, 4.0});
  CHECK(cited.score == doctest::Approx(1.0));
  CHECK(cited.unsupported_specific.empty());
  CHECK(contextOverlap("Paris [1][2] is the capital [2, 3] of France [doc-7].", ctx, {4.0, 4.0})
            .score == doctest::Approx(1.0));
  // A bracketed word without a digit is text, and a real figure still counts.
  const auto d = contextOverlap("The capital of France is Paris [citation needed], 2 million.", ctx,
                                {4.0, 4.0});
  CHECK(d.unsupported_specific == std::vector<std::string>{"2"});
}

TEST_CASE("lightStem equals the rule as first written (suffix list, then a final e)") {
  // The rule, literally: the first of -ies -ing -ed -es -s -ly that ends the token and leaves
  // at least 3 bytes ("-s" not after another s), "-ies" → "-y", then a final "e" of a stem
  // longer than 4 goes; tokens of 4 code points or fewer stay.
  auto literal = [](std::string_view t) -> std::string {
    if (codepointCount(t) <= 4) return std::string(t);
    auto ends = [&](std::string_view s) {
      return t.size() >= s.size() && t.substr(t.size() - s.size()) == s;
    };
    std::string_view stem = t;
    for (std::string_view suffix : {"ies", "ing", "ed", "es", "s", "ly"}) {
      if (ends(suffix) && t.size() - suffix.size() >= 3) {
        if (suffix == "s" && ends("ss")) break;
        stem = t.substr(0, t.size() - suffix.size());
        if (suffix == "ies") return std::string(stem) + "y";
        break;
      }
    }
    if (stem.size() > 4 && stem.back() == 'e') stem.remove_suffix(1);
    return std::string(stem);
  };
  const char* bits[] = {"a", "e", "i",  "s",   "d",   "g",  "n",  "l",
                        "y", "é", "ss", "ies", "ing", "ed", "es", "ly"};
  std::uint64_t state = 3;
  int checked = 0;
  for (int round = 0; round < 50000; ++round) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::uint64_t r = state >> 20;
    std::string t;
    const auto n = 1 + r % 5;
    for (std::uint64_t k = 0; k < n; ++k, r /= 16) t += bits[r % 16];
    CAPTURE(t);
    CHECK(lightStem(t) == literal(t));
    ++checked;
  }
  CHECK(checked == 50000);
}

}  // namespace assay
