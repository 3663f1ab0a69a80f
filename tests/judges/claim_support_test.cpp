#include "judges/claim_support.hpp"

#include <doctest/doctest.h>

namespace assay {
namespace {

Event event(std::string question, std::string answer, const std::vector<std::string>& contexts) {
  Event e;
  e.question = std::move(question);
  e.answer = std::move(answer);
  for (std::size_t i = 0; i < contexts.size(); ++i)
    e.contexts.push_back(Context{"doc-" + std::to_string(i + 1), contexts[i], ""});
  return e;
}

Verdict judge(const Event& e) { return ClaimSupportJudge().judge(e); }

}  // namespace

TEST_CASE("claim_support: a wrong figure costs its weight and its two neighbour pairs") {
  const std::vector<std::string> ctx = {"The plan costs 40 euros a month and includes 5 GB."};
  // Content keys of the answer: cost 40 euro month includ 50 gb, weights 1 4 1 1 1 4 1 (13);
  // "plan" would weigh 0 (the question's). 50 is in no context: u = 9/13.
  // Neighbour pairs, weight max of the two: (cost,40) 4 ✓, (40,euro) 4 ✓, (euro,month) 1 ✓,
  // (month,includ) 1 ✓, (includ,50) 4 ✗, (50,gb) 4 ✗: b = 10/18.
  // One claim: score = 0.5·9/13 + 0.5·10/18 = 0.623932.
  const auto wrong =
      judge(event("How much is the plan?", "It costs 40 euros a month and includes 50 GB.", ctx));
  REQUIRE(wrong.outcome == Outcome::kOk);
  CHECK(wrong.score == doctest::Approx(0.5 * 9.0 / 13.0 + 0.5 * 10.0 / 18.0));
  CHECK(wrong.evidence ==
        "least supported (0.62): \"It costs 40 euros a month and includes 50 GB\"; "
        "unsupported: 50");
  const auto right =
      judge(event("How much is the plan?", "It costs 40 euros a month and includes 5 GB.", ctx));
  CHECK(right.score == doctest::Approx(1.0));
  CHECK(right.evidence.empty());
}

TEST_CASE("claim_support: a negation the context does not make is unsupported") {
  const std::vector<std::string> ctx = {"The warranty covers water damage."};
  // warranty and cover weigh 0 (asked); "water" and "damage" have "not" among the 3 tokens
  // before them, and no context negates them: both unsupported, u = 0, b = 0.
  const auto flipped = judge(
      event("What does the warranty cover?", "The warranty does not cover water damage.", ctx));
  CHECK(flipped.score == doctest::Approx(0.0));
  CHECK(flipped.evidence.find("unsupported: water damage") != std::string::npos);
  const auto faithful =
      judge(event("What does the warranty cover?", "The warranty covers water damage.", ctx));
  CHECK(faithful.score == doctest::Approx(1.0));
  // The same words negated on both sides agree.
  const auto both =
      judge(event("What does the warranty cover?", "The warranty does not cover water damage.",
                  {"The warranty does not cover water damage."}));
  CHECK(both.score == doctest::Approx(1.0));
}

TEST_CASE("claim_support: one invented sentence pulls three supported ones down") {
  const std::vector<std::string> ctx = {
      "The Loire is the longest river in France. It flows into the Atlantic Ocean. Its source "
      "is in the Massif Central."};
  const std::string three =
      "It is the longest river in France. It flows into the Atlantic. Its source is in the "
      "Massif Central.";
  // Each of the three claims is fully supported (keys and neighbour pairs): 1.0.
  CHECK(judge(event("Tell me about the Loire.", three, ctx)).score == doctest::Approx(1.0));
  // The fourth claim: paint, monet, 1890 (weights 1, 1, 4) in no context: 0.
  // Weighted mean = (3·1 + 2·1 + 3·1 + 6·0) / 14 = 8/14; lowest 0 → 0.4·8/14 = 0.228571.
  const auto four =
      judge(event("Tell me about the Loire.", three + " It was painted by Monet in 1890.", ctx));
  CHECK(four.score == doctest::Approx(0.4 * 8.0 / 14.0));
  CHECK(four.evidence ==
        "least supported (0.00): \"It was painted by Monet in 1890\"; unsupported: painted "
        "Monet 1890");
}

TEST_CASE("claim_support: an answer that restates the question is not fully supported") {
  const auto v =
      judge(event("When does the museum open on Sundays?", "The museum opens on Sundays.",
                  {"The museum opens at 10:00 on Sundays."}));
  REQUIRE(v.outcome == Outcome::kOk);
  CHECK(v.score == doctest::Approx(0.5));
  CHECK(v.evidence.find("restates the question") != std::string::npos);
}

TEST_CASE("claim_support: Chinese per character, French with elisions and number words") {
  const std::vector<std::string> zh = {"会议改到周三下午三点。"};
  // 会 议 are the question's (weight 0); 改 到 周 三 are in the context, in that order: 1.0.
  CHECK(judge(event("会议什么时候？", "会议改到周三。", zh)).score == doctest::Approx(1.0));
  // 五 is not: u = 3/4; pairs (议,改) (改,到) (到,周) ✓, (周,五) ✗: b = 3/4 → 0.75.
  const auto friday = judge(event("会议什么时候？", "会议改到周五。", zh));
  REQUIRE(friday.outcome == Outcome::kOk);
  CHECK(friday.score == doctest::Approx(0.75));
  CHECK(friday.evidence.find("unsupported: 五") != std::string::npos);

  const std::vector<std::string> fr = {"L'école ouvre à huit heures le lundi."};
  // "huit" is the number 8: an answer that writes 8 is supported.
  CHECK(judge(event("Quand l'école ouvre-t-elle ?", "L'école ouvre à 8 heures le lundi.", fr))
            .score == doctest::Approx(1.0));
  // école, ouvr weigh 0 (asked); 9 (4) unsupported, heur and lundi (1, 1) supported: u = 2/6;
  // pairs (ouvr,9) 4 ✗, (9,heur) 4 ✗, (heur,lundi) 1 ✓, (école,ouvr) 0: b = 1/9.
  const auto nine =
      judge(event("Quand l'école ouvre-t-elle ?", "L'école ouvre à 9 heures le lundi.", fr));
  CHECK(nine.score == doctest::Approx(0.5 * 2.0 / 6.0 + 0.5 / 9.0));
}

TEST_CASE("claim_support: outcomes without evidence to judge") {
  CHECK(judge(event("Q?", "An answer.", {})).outcome == Outcome::kNoContext);
  CHECK(judge(event("Q?", "An answer.", {""})).outcome == Outcome::kNoContext);
  CHECK(judge(event("Q?", "", {"ctx"})).outcome == Outcome::kEmptyInput);
  CHECK(judge(event("Q?", "It is the [1].", {"ctx"})).outcome == Outcome::kEmptyInput);
  // Hostile input: invalid UTF-8 and a long run of one word stay bounded and in range.
  const auto v = judge(event("Q?", std::string(100000, 'a') + " \xff\xfe b.", {"a b"}));
  REQUIRE(v.outcome == Outcome::kOk);
  CHECK(v.score >= 0.0);
  CHECK(v.score <= 1.0);
  CHECK(v.evidence.size() < 400);
}

}  // namespace assay
