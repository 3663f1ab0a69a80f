#include "judges/claim_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "judges/tokenizer.hpp"

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
  // Content keys of the answer: cost 40 euro month includ 50 gb, weights 1 2 1 1 1 2 1 (9);
  // "plan" would weigh 0 (the question's). 50 is in no context: u = 7/9.
  // Neighbour pairs, weight max of the two: (cost,40) 2 ✓, (40,euro) 2 ✓, (euro,month) 1 ✓,
  // (month,includ) 1 ✓, (includ,50) 2 ✗, (50,gb) 2 ✗: b = 6/10.
  // One claim, so the score is its support: 0.5·7/9 + 0.5·6/10 = 0.688889.
  const auto wrong =
      judge(event("How much is the plan?", "It costs 40 euros a month and includes 50 GB.", ctx));
  REQUIRE(wrong.outcome == Outcome::kOk);
  CHECK(wrong.score == doctest::Approx(0.5 * 7.0 / 9.0 + 0.5 * 6.0 / 10.0));
  CHECK(wrong.evidence ==
        "least supported (0.69): \"It costs 40 euros a month and includes 50 GB\"; "
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
  // The fourth claim: paint, monet, 1890 (weights 1, 1, 2) in no context: 0.
  // Weighted mean = (3·1 + 2·1 + 3·1 + 4·0) / 12 = 8/12 over 4 claims: the shortfall 4/12
  // divided by √4 → 1 − 1/6 = 0.833333, below the three alone.
  const auto four =
      judge(event("Tell me about the Loire.", three + " It was painted by Monet in 1890.", ctx));
  CHECK(four.score == doctest::Approx(1.0 - 1.0 / 6.0));
  CHECK(four.evidence ==
        "least supported (0.00): \"It was painted by Monet in 1890\"; unsupported: painted "
        "Monet 1890");
}

TEST_CASE("claim_support: an answer that restates the question is not fully supported") {
  const auto v =
      judge(event("When does the museum open on Sundays?", "The museum opens on Sundays.",
                  {"The museum opens at 10:00 on Sundays."}));
  REQUIRE(v.outcome == Outcome::kOk);
  CHECK(v.score == doctest::Approx(0.7));
  CHECK(v.evidence.find("restates the question") != std::string::npos);
}

TEST_CASE("claim_support: a sentence that cites nothing in an answer that cites") {
  const std::vector<std::string> ctx = {"The plan costs 40 euros a month.",
                                        "The plan includes 5 GB of data."};
  // plan and cost weigh 0 (asked). Claim 1: 40 euro month, claim 2: includ 5 gb data, every
  // key and neighbour pair in a context: both 1.0, mean 1, score 1 − 0/√2 = 1.
  CHECK(judge(event("What does the plan cost?",
                    "The plan costs 40 euros a month [1]. It includes 5 GB of data [2].", ctx))
            .score == doctest::Approx(1.0));
  // A marker after the period, before the next sentence's first word, cites back.
  CHECK(judge(event("What does the plan cost?",
                    "The plan costs 40 euros a month. [1] It includes 5 GB of data. [2]", ctx))
            .score == doctest::Approx(1.0));
  // The second sentence cites nothing while the first does: the same supports, × 0.3.
  const auto uncited =
      judge(event("What does the plan cost?",
                  "The plan costs 40 euros a month [1]. It includes 5 GB of data.", ctx));
  CHECK(uncited.score == doctest::Approx(0.3));
  CHECK(uncited.evidence ==
        "uncited (1 of 2 sentences cite no context): \"It includes 5 GB of data\"");
  // An answer with no marker at all is judged on its words alone.
  CHECK(judge(event("What does the plan cost?",
                    "The plan costs 40 euros a month. It includes 5 GB of data.", ctx))
            .score == doctest::Approx(1.0));
}

TEST_CASE("sentenceSpans: abbreviations, initials, markers and CJK") {
  const std::string t =
      "In the U.S. bicameral system, x [3][5]. The Senate, e.g. Bob, is big [3]. Six-year "
      "terms.[5] Some powers.\n\nNevertheless, y [5]. A 3.5 GB plan? Yes! 会议改到周三。好的";
  std::vector<std::string> got;
  for (const auto& [b, e] : sentenceSpans(t)) got.push_back(t.substr(b, e - b));
  const std::vector<std::string> want = {"In the U.S. bicameral system, x [3][5].",
                                         " The Senate, e.g. Bob, is big [3].",
                                         " Six-year terms.[5]",
                                         " Some powers.",
                                         "\n\nNevertheless, y [5].",
                                         " A 3.5 GB plan?",
                                         " Yes!",
                                         " 会议改到周三。",
                                         "好的"};
  CHECK(got == want);
  CHECK(sentenceSpans("").empty());
  CHECK(sentenceSpans("  \n ").empty());
  // A lower-case word after a period goes on; "George R. R. Martin" is one sentence.
  CHECK(sentenceSpans("It costs approx. five euros. George R. R. Martin wrote it.").size() == 2);
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
  // école, ouvr weigh 0 (asked); 9 (2) unsupported, heur and lundi (1, 1) supported: u = 2/4;
  // pairs (ouvr,9) 2 ✗, (9,heur) 2 ✗, (heur,lundi) 1 ✓, (école,ouvr) 0: b = 1/5.
  const auto nine =
      judge(event("Quand l'école ouvre-t-elle ?", "L'école ouvre à 9 heures le lundi.", fr));
  CHECK(nine.score == doctest::Approx(0.5 * 2.0 / 4.0 + 0.5 / 5.0));
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

namespace assay {

TEST_CASE("claim_support: '18 h.' ends a sentence; the letters of 'e.g.' are not claim words") {
  // An operator trial: a lower-case letter before a period was taken for an initial, so an
  // invented sentence after "18 h." merged with the supported one (0.79 instead of ~0.5).
  const std::vector<std::string> ctx = {"Le musée ouvre de 9 h à 18 h."};
  CHECK(sentenceSpans("Le musée ouvre de 9 h à 18 h. Napoléon l'a fondé.").size() == 2);
  // Two claims: musé ouvr 9 18 (weights 0 0 2 2, the question gives musé and ouvr) fully
  // supported = 1; napoléon fond (1 1) in no context = 0. Mean (4·1 + 2·0) / 6 = 2/3 over
  // 2 claims: 1 − (1/3)/√2 = 0.764298.
  const auto v = ClaimSupportJudge().judge(event(
      "Quand le musée ouvre-t-il ?", "Le musée ouvre de 9 h à 18 h. Napoléon l'a fondé.", ctx));
  CHECK(v.score == doctest::Approx(1.0 - (1.0 / 3.0) / std::sqrt(2.0)));
  CHECK(v.evidence.find("Napoléon l'a fondé") != std::string::npos);
  const std::vector<std::string> plans = {"Every plan includes extras such as roaming."};
  CHECK(
      judge(event("What do plans include?", "Plans include extras, e.g. roaming.", plans)).score ==
      doctest::Approx(
          *judge(event("What do plans include?", "Plans include extras, roaming.", plans)).score));
  // Chinese function characters (它 "it") are not claims either.
  const std::vector<std::string> zh = {"长城长两万一千公里。"};
  CHECK(judge(event("长城有多长？", "它长两万一千公里。", zh)).score == doctest::Approx(1.0));
}

}  // namespace assay

namespace assay {

TEST_CASE("context_recall: the share of the reference's claims the contexts support") {
  Event e;
  e.question = "How long is the warranty?";
  e.contexts.push_back(Context{"1", "The warranty lasts two years.", ""});
  e.answer = "Two years.";
  e.reference = "The warranty lasts two years. It covers water damage.";
  const ContextRecallJudge judge;
  const auto half = judge.judge(e);
  REQUIRE(half.outcome == Outcome::kOk);
  CHECK(*half.score == 0.5);
  CHECK(half.evidence ==
        "1 of 2 reference claims found in the contexts; least found (0.00): \"It covers water "
        "damage\"; missing: covers water damage");
  e.contexts.push_back(Context{"2", "Water damage is covered.", ""});
  CHECK(*judge.judge(e).score == 1.0);  // "covers" and "covered": one key, and the pair
  e.reference = "Two years";            // the number only: found
  CHECK(*judge.judge(e).score == 1.0);
  e.reference = "Three years";
  CHECK(*judge.judge(e).score == 0.0);
  e.reference = "The warranty?";  // nothing beyond the question's words
  CHECK(judge.judge(e).outcome == Outcome::kEmptyInput);
  e.reference.reset();
  CHECK(judge.judge(e).outcome == Outcome::kNoReference);
  e.reference = "Two years.";
  e.contexts.clear();
  CHECK(judge.judge(e).outcome == Outcome::kNoContext);
}

}  // namespace assay
