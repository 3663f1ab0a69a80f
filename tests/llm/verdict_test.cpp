#include "judges/llm/verdict.hpp"

#include <doctest/doctest.h>

#include "core/utf8.hpp"

using namespace assay;
using namespace assay::llm;

namespace {
LlmVerdict parse(std::string_view reply, FinishReason f = FinishReason::kStop) {
  return parseVerdict(reply, f, 1, 4);
}
}  // namespace

TEST_CASE("a plain verdict object") {
  const auto v = parse(
      R"({"score": 3, "justification": "Mostly supported.", "unsupported_claim": "the 1987 date"})");
  REQUIRE(v.outcome == Outcome::kOk);
  CHECK(v.score == 3);
  CHECK(v.justification == "Mostly supported.");
  CHECK(v.unsupported_claim == "the 1987 date");
  const auto null_claim = parse(R"({"score":4,"justification":"ok","unsupported_claim":null})");
  REQUIRE(null_claim.outcome == Outcome::kOk);
  CHECK_FALSE(null_claim.unsupported_claim.has_value());
}

TEST_CASE("one markdown fence is stripped, no retry needed") {
  const auto v = parse("```json\n{\"score\": 2, \"justification\": \"x\"}\n```\n");
  CHECK(v.outcome == Outcome::kOk);
  CHECK(v.score == 2);
  CHECK(parse("  ```\n{\"score\": 1, \"justification\": \"x\"}\n```").score == 1);
  // Two fences, or prose around the object: not a verdict.
  CHECK(parse("```json\n{\"score\": 2, \"justification\": \"x\"}\n```\n```json\n{}\n```").outcome ==
        Outcome::kSchemaError);
  CHECK(parse("Here is my verdict: {\"score\": 2, \"justification\": \"x\"}").outcome ==
        Outcome::kSchemaError);
  CHECK(parse("{\"score\": 2, \"justification\": \"x\"} Hope this helps!").outcome ==
        Outcome::kSchemaError);
  // A fence inside the justification's string: the outer fence is stripped, the inner is text.
  const auto inner = parse(
      "```json\n{\"score\": 3, \"justification\": \"The answer quotes ```json\\n{}\\n``` "
      "from the context.\"}\n```");
  REQUIRE(inner.outcome == Outcome::kOk);
  CHECK(inner.score == 3);
  CHECK(inner.justification == "The answer quotes ```json\n{}\n``` from the context.");
}

TEST_CASE("a score of digits in a string is read; anything else is schema_error") {
  const auto v = parse(R"({"score": "3", "justification": "x"})");
  REQUIRE(v.outcome == Outcome::kOk);
  CHECK(v.score == 3);
  // A whole number written as a float is that integer (issue 29: "score": 2.0 was schema_error).
  for (const char* whole :
       {R"({"score": 2.0, "justification": "x"})", R"({"score": 2e0, "justification": "x"})"}) {
    CAPTURE(whole);
    const auto f = parse(whole);
    REQUIRE(f.outcome == Outcome::kOk);
    CHECK(f.score == 2);
  }
  for (const char* bad :
       {R"({"score": "3/4", "justification": "x"})", R"({"score": "three", "justification": "x"})",
        R"({"score": 0.8, "justification": "x"})", R"({"score": 3.5, "justification": "x"})",
        R"({"score": 5.0, "justification": "x"})", R"({"score": -0.0, "justification": "x"})",
        R"({"score": 7.5e30, "justification": "x"})", R"({"score": 5, "justification": "x"})",
        R"({"score": 0, "justification": "x"})", R"({"score": "9", "justification": "x"})",
        R"({"score": -1, "justification": "x"})", R"({"score": " 3", "justification": "x"})",
        // The schema's pattern stops at a NUL: every byte must be a digit.
        R"({"score": "3\u0000zz", "justification": "x"})",
        R"({"score": true, "justification": "x"})", R"({"score": 3})", R"({"justification": "x"})",
        R"({"score": 3, "justification": 7})",
        R"({"score": 3, "justification": "x", "unsupported_claim": 5})",
        R"([{"score": 3, "justification": "x"}])", R"({"score": 3, "justification": "x")", "",
        "   \n"}) {
    CAPTURE(bad);
    const auto r = parse(bad);
    CHECK(r.outcome == Outcome::kSchemaError);
    CHECK_FALSE(r.score.has_value());
    CHECK_FALSE(r.justification.empty());  // says what was wrong
  }
  // A null score is the judge abstaining (issue 12), not a malformed verdict.
  CHECK(parse(R"({"score": null, "justification": "x"})").outcome == Outcome::kAbstained);
}

TEST_CASE("only the top-level score counts") {
  const auto v = parse(
      R"({"justification": "The answer claims {\"score\": 4}.", "details": {"score": 4}, "score": 1})");
  REQUIRE(v.outcome == Outcome::kOk);
  CHECK(v.score == 1);
}

TEST_CASE("a reply cut at max_tokens is truncated, even when it is only white space") {
  CHECK(parse(R"({"score": 3, "justif)", FinishReason::kLength).outcome == Outcome::kTruncated);
  CHECK(parse("   \n", FinishReason::kLength).outcome == Outcome::kTruncated);
  // Even a complete object: a cut reply is not judged.
  CHECK(parse(R"({"score": 3, "justification": "x"})", FinishReason::kLength).outcome ==
        Outcome::kTruncated);
}

TEST_CASE("refusals") {
  CHECK(parse("", FinishReason::kRefusal).outcome == Outcome::kRefused);
  CHECK(parse("I'm sorry, but I can't help with evaluating this content.").outcome ==
        Outcome::kRefused);
  CHECK(parse("I can\xE2\x80\x99t assist with that.").outcome == Outcome::kRefused);
  CHECK(parse("The answer is good.").outcome == Outcome::kSchemaError);
  // The many phrasings, English and French (and a typographic apostrophe).
  for (const char* text : {
           "I cannot evaluate this content as it may be harmful.",
           "I'm unable to provide a rating for this answer.",
           "Sorry, but I can\xE2\x80\x99t do that.",
           "I must decline to score this response.",
           "As an AI developed to be helpful, I won't grade content like this.",
           "I apologize, but this request falls outside what I can do.",
           "Je ne peux pas évaluer cette réponse.",
           "Désolé, mais je ne suis pas en mesure de noter ce contenu.",
           "Je suis désolée : il m'est impossible de juger cette réponse.",
           "```\nI can't help with that.\n```",
       }) {
    CAPTURE(text);
    CHECK(parse(text).outcome == Outcome::kRefused);
  }
  // The refusal's text is kept, cut at 200 bytes between characters (issue 28: a cut inside "é"
  // wrote a justification that is not UTF-8 into JSON Lines).
  std::string long_refusal = "Je ne peux pas juger ";
  for (int i = 0; i < 150; ++i) long_refusal += "\xC3\xA9";
  const auto cut = parse(long_refusal);
  CHECK(cut.outcome == Outcome::kRefused);
  CHECK(isValidUtf8(cut.justification));
  CHECK(cut.justification.size() == 21 + 2 * 89 + 3);  // 21 + 89 × "é" ≤ 200, then "…"
  // A refusal inside an object without a score.
  CHECK(parse(R"({"refusal": "I can't evaluate this."})").outcome == Outcome::kRefused);
  CHECK(parse(R"({"justification": "Je ne peux pas juger ce contenu."})").outcome ==
        Outcome::kRefused);
  // Not refusals: a verdict whose justification says "I won't", and an object missing a score.
  CHECK(parse(R"({"score": 2, "justification": "I won't count the second claim: unsupported."})")
            .score == 2);
  CHECK(parse(R"({"justification": "mostly supported"})").outcome == Outcome::kSchemaError);
  CHECK(parse("Score: 3. I won't elaborate; {\"score\": 3}").outcome == Outcome::kSchemaError);
}

TEST_CASE("other rubric ranges and outcome names") {
  CHECK(parseVerdict(R"({"score": 10, "justification": "x"})", FinishReason::kStop, 1, 10).score ==
        10);
  CHECK(parseVerdict(R"({"score": 0, "justification": "x"})", FinishReason::kStop, 0, 1).score ==
        0);
  CHECK(outcomeName(Outcome::kSchemaError) == "schema_error");
  CHECK(outcomeName(Outcome::kSkippedBudget) == "skipped_budget");
  CHECK(outcomeName(Outcome::kContextTooLong) == "context_too_long");
}

TEST_CASE("a reply nested 600,000 deep or with a NUL byte is a schema_error, never a crash") {
  const auto deep = parseVerdict(R"({"score": 3, "justification": "x", "y": )" +
                                     std::string(600'000, '[') + std::string(600'000, ']') + "}",
                                 FinishReason::kStop, 1, 4);
  CHECK(deep.outcome == Outcome::kSchemaError);
  CHECK(deep.justification.find("nested deeper") != std::string::npos);
  const auto nul =
      parseVerdict(std::string(R"({"score": 3, "justification": "x"})") + '\0' + R"({"score": 1})",
                   FinishReason::kStop, 1, 4);
  CHECK(nul.outcome == Outcome::kSchemaError);
}

TEST_CASE("reasoning preambles, duplicate keys, claim lists and none, capped justifications") {
  // A byte-order mark, and a <think> block before the object (open reasoning models).
  CHECK(parse("\xEF\xBB\xBF{\"score\": 2, \"justification\": \"x\"}").score == 2);
  const auto thought = parse(
      "<think>\nThe answer says 50 GB; the context says 5 GB. {\"score\": 4}\n</think>\n\n"
      "{\"score\": 1, \"justification\": \"50 GB contradicts 5 GB.\"}");
  REQUIRE(thought.outcome == Outcome::kOk);
  CHECK(thought.score == 1);  // the verdict after the block, not the score inside it
  // Only the block's end: the chat template opened it (DeepSeek-R1, QwQ, Qwen3 served that way).
  const auto closing = parse(
      "The answer says 50 GB; the context says 5 GB, so {\"score\": 4} is wrong.\n</think>\n\n"
      "{\"score\": 1, \"justification\": \"50 GB contradicts 5 GB.\"}");
  REQUIRE(closing.outcome == Outcome::kOk);
  CHECK(closing.score == 1);
  CHECK(
      parse("reasoning </think> more </think> {\"score\": 1, \"justification\": \"x\"}").outcome ==
      Outcome::kSchemaError);  // two ends: text before the object
  // Thinking without a reply after it is no verdict (what the model thought is not its answer).
  CHECK(parse("<think>I can't evaluate this.</think>").justification == "empty reply");
  // Which score did the model mean? Neither.
  const auto twice = parse(R"({"score": 1, "justification": "x", "score": 4})");
  CHECK(twice.outcome == Outcome::kSchemaError);
  CHECK(twice.justification == "the key \"score\" occurs twice in one object");
  // A long key is cut between characters: 59 'k' then 'é' put byte 60 inside the 'é'.
  const auto long_key = parse("{\"score\": 1, \"" + std::string(59, 'k') + "\xC3\xA9\": 1, \"" +
                              std::string(59, 'k') + "\xC3\xA9\": 2}");
  CHECK(long_key.justification ==
        "the key \"" + std::string(59, 'k') + "\xE2\x80\xA6\" occurs twice in one object");
  // unsupported_claim: a list is joined; "", "None", "null", "N/A" mean none.
  const auto list = parse(
      R"({"score": 2, "justification": "x", "unsupported_claim": ["50 GB", "None", "in 1987"]})");
  REQUIRE(list.outcome == Outcome::kOk);
  CHECK(*list.unsupported_claim == "50 GB; in 1987");
  for (const char* none : {"\"\"", "\"None\"", "\"null\"", "\"N/A\"", "[]", "[\"none\"]"}) {
    const auto v = parse(
        std::string(R"({"score": 4, "justification": "x", "unsupported_claim": )") + none + "}");
    REQUIRE(v.outcome == Outcome::kOk);
    CHECK_FALSE(v.unsupported_claim.has_value());
  }
  CHECK(parse(R"({"score": 4, "justification": "x", "unsupported_claim": [3]})").outcome ==
        Outcome::kSchemaError);
  // 2,000 bytes at most, cut between characters: "é" is 2 bytes, 1,500 of them are 3,000.
  std::string long_text;
  for (int i = 0; i < 1500; ++i) long_text += "\xC3\xA9";
  const auto capped = parse(R"({"score": 3, "justification": ")" + long_text + "\"}");
  REQUIRE(capped.outcome == Outcome::kOk);
  CHECK(capped.justification.size() == 2000 + 3);  // 1,000 "é" and "…"
  CHECK(capped.justification.substr(2000) == "\xE2\x80\xA6");
}

TEST_CASE("{\"score\": null} with a justification is abstained, the reason kept") {
  const auto v = parseVerdict(
      R"({"justification": "The answer is empty: nothing to judge.", "unsupported_claim": null, "score": null})",
      FinishReason::kStop, 1, 4);
  CHECK(v.outcome == Outcome::kAbstained);
  CHECK_FALSE(v.score.has_value());
  CHECK(v.justification == "The answer is empty: nothing to judge.");
  // Without a justification it is not a verdict at all.
  CHECK(parseVerdict(R"({"score": null})", FinishReason::kStop, 1, 4).outcome ==
        Outcome::kSchemaError);
  CHECK(outcomeName(Outcome::kAbstained) == "abstained");
  CHECK(outcomeName(Outcome::kContextsTrimmed) == "contexts_trimmed");
}

TEST_CASE("the kept schema validator: a reply over 64 KiB gets its own, results unchanged") {
  // A long unknown member (allowed by the schema) makes a validator take about twice the key's
  // size; replies over 64 KiB use a validator of their own, so the kept one stays small. Either
  // way the verdicts are the same, in any order (no state carried from one reply to the next).
  const std::string big_key(100 * 1024, 'k');
  const std::string big = R"({")" + big_key + R"(": 1, "score": 4, "justification": "long"})";
  const std::string bad_then = R"({"score": "nine", "justification": "x"})";
  const std::string good = R"({"score": 2, "justification": "fine"})";
  for (int round = 0; round < 2; ++round) {
    const auto b = parse(big);
    REQUIRE(b.outcome == Outcome::kOk);
    CHECK(b.score == 4);
    CHECK(parse(bad_then).outcome == Outcome::kSchemaError);
    const auto g = parse(good);
    REQUIRE(g.outcome == Outcome::kOk);
    CHECK(g.score == 2);
    CHECK(g.justification == "fine");
  }
  const std::string big_bad = R"({")" + big_key + R"(": 1, "score": "x", "justification": "j"})";
  const auto v = parse(big_bad);
  CHECK(v.outcome == Outcome::kSchemaError);
  CHECK(v.justification.find("violates the verdict schema") != std::string::npos);
}
