// Abstentions (judges/abstention.hpp): declining, or saying the contexts do not cover the
// question, is the outcome `abstained` for the faithfulness judges, never a low score; a hedge
// is judged on what it asserts.
#include "judges/abstention.hpp"

#include <doctest/doctest.h>

#include <string>

#include "judges/claim_support.hpp"
#include "judges/context_overlap.hpp"

namespace assay {
namespace {

Event event(std::string answer) {
  Event e;
  e.id = "e";
  e.question = "How long is the warranty?";
  e.answer = std::move(answer);
  e.contexts.push_back(Context{"1", "The warranty lasts two years and covers parts.", ""});
  return e;
}

/// The asserted part of a sentence that abstains ("" = nothing asserted); "-" = no abstention.
std::string asserted(std::string_view s) {
  const auto a = sentenceAbstention(s);
  if (!a.abstains) return "-";
  return a.asserted;
}

}  // namespace

TEST_CASE("abstention: whole abstentions in English and French, none where a fact is stated") {
  for (const char* s : {
           "Not stated in the documents.",
           "I don't know.",
           "I do not know",
           "I’m not sure.",
           "i ' m not sure .",
           "I have no idea.",
           "The provided context does not mention the warranty.",
           "The documents don't say how long it lasts.",
           "This is not mentioned in the provided context.",
           "The information is not available in the retrieved documents.",
           "There is no information about the warranty in the context.",
           "Additional information is required to answer.",
           "It cannot be determined from the passages.",
           "Je ne sais pas.",
           "Le contexte ne précise pas la durée de la garantie.",
           "Aucune information sur la garantie.",
           "La durée n'est pas mentionnée dans les documents.",
       }) {
    const std::string text = s;
    CAPTURE(text);
    CHECK(asserted(text) == "");
    CHECK(answerAbstains(text));
  }
  for (const char* s : {
           "The warranty does not cover water damage.", "I had no idea he died.",
           "I'm sure it lasts two years.", "The text of the contract is long.",
           "He does not know the answer, the documents say.",  // reported speech: no pattern
           "i didn ' t know that . i know that tolkien adapted orcs .",  // surprise, not doubt
       }) {
    const std::string text = s;
    CAPTURE(text);
    CHECK(asserted(text) == "-");
    CHECK_FALSE(answerAbstains(text));
  }
}

TEST_CASE("abstention: a hedge asserts what surrounds its abstention") {
  CHECK(asserted("i ' m not sure , but they were founded in 1971") == "they were founded in 1971");
  CHECK(asserted("I'm not sure, but I do know that it originated in Michigan.") ==
        "I do know that it originated in Michigan.");
  CHECK(asserted("well i'm not sure i do know the role was related to nursing.") ==
        "the role was related to nursing.");
  CHECK(asserted("The context does not mention it; however, the warranty lasts two years.") ==
        ", the warranty lasts two years.");
  CHECK(asserted("While the text does not provide a detailed explanation, it implies a link.") ==
        "it implies a link.");
  CHECK(asserted("Je ne sais pas, mais elle dure deux ans.") == "elle dure deux ans.");
  // A boundary followed by 3 words or more; fewer is an aside.
  CHECK(asserted("I 'm not sure , they released the first book in 1997 .") ==
        "they released the first book in 1997 .");
  CHECK(asserted("i'm not sure if you like green. i do know that minerals are green.") ==
        "that minerals are green.");
  CHECK(asserted("Not stated in the documents, unfortunately.") == "");
  CHECK(asserted("Not stated in the documents: 10 years.") == "10 years.");  // a figure asserts
  // Before the abstention, up to a connector; a rest that abstains again asserts nothing.
  CHECK(asserted("It has six novels, but I don't know any audio books.") == "It has six novels,");
  CHECK(asserted("The context does not say, and I cannot tell which.") == "");
  // The hostile trial: a lie must not hide behind a hedge without a connector, before or after.
  CHECK(asserted("Acme was founded in 1971 by Mary Jones in Paris, I'm not sure.") ==
        "Acme was founded in 1971 by Mary Jones in Paris,");
  CHECK(asserted("It makes rockets and anvils, I don't know more.") ==
        "It makes rockets and anvils,");
  CHECK(asserted("I don't know why Acme was founded in 1971 by Mary Jones.") ==
        "why Acme was founded in 1971 by Mary Jones.");
  CHECK(asserted("Acme a été fondée en 1971 à Paris, je ne sais pas pourquoi.") ==
        "Acme a été fondée en 1971 à Paris,");
  // …while lead-ins and objects of the doubt stay no claim.
  CHECK(asserted("Based on the provided context, there is no information about the warranty.") ==
        "");
  CHECK(asserted("I don't know the name of the drummer.") == "");
  // Partial answers: not a whole abstention.
  CHECK_FALSE(answerAbstains("I don't know the brand. The warranty lasts two years."));
  CHECK_FALSE(answerAbstains("I'm not sure, but it lasts two years."));
  CHECK_FALSE(answerAbstains(""));
}

TEST_CASE("abstention: linear in the sentence (many connectors before the phrase)") {
  // The hostile trial: "but " × n + "I don't know." copied the prefix once per connector.
  std::string s;
  for (int i = 0; i < 200'000; ++i) s += "but ";
  s += "I don't know.";
  const auto a = sentenceAbstention(s);  // 800 KB: quadratic took seconds, linear a few ms
  CHECK(a.abstains);
  CHECK(a.asserted.empty());
}

TEST_CASE("abstention: the faithfulness judges say abstained, never a low score") {
  // ragas #2806, tried as a new user would: "Not stated in the documents." scored 0.0, the
  // lowest faithfulness there is, and "I don't know." got no score (empty_input).
  for (const char* a :
       {"Not stated in the documents.", "I don't know.",
        "The provided context does not mention how long the warranty lasts.", "Je ne sais pas."}) {
    const std::string text = a;
    CAPTURE(text);
    const auto cs = ClaimSupportJudge().judge(event(text));
    CHECK(cs.outcome == Outcome::kAbstained);
    CHECK_FALSE(cs.score.has_value());
    CHECK(cs.evidence.rfind("the answer abstains: \"", 0) == 0);
    CHECK(ContextOverlapJudge(ContextOverlapOptions{}).judge(event(text)).outcome ==
          Outcome::kAbstained);
  }
  // A partial abstention is judged on what it asserts: the same score as the assertion alone.
  const auto alone = ClaimSupportJudge().judge(event("It lasts two years."));
  const auto hedged = ClaimSupportJudge().judge(event("I'm not sure, but it lasts two years."));
  REQUIRE(hedged.outcome == Outcome::kOk);
  CHECK(hedged.score == alone.score);
  CHECK(hedged.evidence.find("judged on what it asserts (1 sentence(s) abstain") !=
        std::string::npos);
  const auto wrong = ClaimSupportJudge().judge(
      event("The context does not say who makes it. It lasts ten years."));
  REQUIRE(wrong.outcome == Outcome::kOk);
  CHECK(*wrong.score == *ClaimSupportJudge().judge(event("It lasts ten years.")).score);
  CHECK(*wrong.score < *alone.score);
}

}  // namespace assay
