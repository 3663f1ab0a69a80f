#include "judges/checks.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "judges/abstention.hpp"
#include "judges/json_valid.hpp"
#include "tests/test_paths.hpp"

namespace assay {
namespace {

const std::string kDataDir = std::string(test::kTestDataDir) + "/judges/data";

Event answerOnly(std::string answer) {
  Event e;
  e.question = "How long is the warranty?";
  e.answer = std::move(answer);
  return e;
}

Event withContexts(std::string answer, std::size_t n) {
  Event e = answerOnly(std::move(answer));
  for (std::size_t i = 0; i < n; ++i) {
    e.contexts.push_back(
        Context{"doc-" + std::to_string(i + 1), "chunk " + std::to_string(i + 1), ""});
  }
  return e;
}

Event jsonAnswer(std::string answer) {
  Event e = answerOnly(std::move(answer));
  e.expected_format = AnswerFormat::kJson;
  return e;
}

/// The pass/fail result of a check, asserting it is a well-formed check verdict.
bool passes(const Judge& j, const Event& e) {
  const auto v = j.judge(e);
  REQUIRE(v.outcome == Outcome::kOk);
  REQUIRE(v.passed.has_value());
  REQUIRE(v.score.has_value());
  CHECK(*v.score == (*v.passed ? 1.0 : 0.0));
  return *v.passed;
}

template <typename J>
std::unique_ptr<Judge> make(std::initializer_list<std::pair<const char*, OptionValue>> opts) {
  JudgeOptionValues o;
  for (const auto& [k, v] : opts) o.set(k, v);
  return J::create(o);
}

template <typename J>
std::string optionErrorKey(std::initializer_list<std::pair<const char*, OptionValue>> opts) {
  try {
    make<J>(opts);
  } catch (const OptionError& e) {
    return e.key;
  }
  return "<no OptionError>";
}

using Strings = std::vector<std::string>;

}  // namespace

// ---- answer_nonempty ---------------------------------------------------------------------------

TEST_CASE("answer_nonempty") {
  const auto j = AnswerNonemptyJudge::create({});
  CHECK(passes(*j, answerOnly("The warranty lasts five years.")));
  CHECK(passes(*j, answerOnly(" x ")));
  CHECK(passes(*j, answerOnly("会")));
  CHECK(passes(*j, answerOnly("0")));
  CHECK_FALSE(passes(*j, answerOnly("")));
  CHECK_FALSE(passes(*j, answerOnly("   \t\r\n ")));
  CHECK_FALSE(passes(*j, answerOnly("\u00A0\u00A0")));  // NO-BREAK SPACE only
  CHECK_FALSE(passes(*j, answerOnly("\u3000\u200B")));  // ideographic space, zero-width space
  CHECK(j->judge(answerOnly("")).evidence == "answer is empty or white space");
}

// ---- cites_source ------------------------------------------------------------------------------

TEST_CASE("cites_source: bracketed index markers") {
  const auto j = CitesSourceJudge::create({});
  CHECK(passes(*j, withContexts("The warranty lasts five years [1].", 2)));
  CHECK(passes(*j, withContexts("Five years [2].", 2)));
  CHECK(passes(*j, withContexts("Five years [1, 3].", 3)));
  CHECK(passes(*j, withContexts("Five years [1][2].", 2)));
  CHECK(passes(*j, withContexts("Five years [4; 2].", 2)));  // one valid index is enough
  CHECK(j->judge(withContexts("Five years [1, 3].", 3)).evidence == "cites [1]");
  // [7] with only two contexts points to nothing.
  const auto dangling = j->judge(withContexts("Five years [7].", 2));
  REQUIRE(dangling.passed.has_value());
  CHECK_FALSE(*dangling.passed);
  CHECK(dangling.evidence == "citation markers point to no retrieved context");
  CHECK_FALSE(passes(*j, withContexts("Five years [0].", 2)));
  CHECK_FALSE(passes(*j, withContexts("Five years [3].", 2)));
  CHECK_FALSE(passes(*j, withContexts("Five years.", 2)));
  CHECK_FALSE(passes(*j, withContexts("Five years [see above].", 2)));
  CHECK_FALSE(passes(*j, withContexts("Five years [1", 2)));  // never closed
  CHECK(j->judge(withContexts("Five years.", 2)).evidence == "no citation of a retrieved context");
}

TEST_CASE("cites_source: bracketed context id") {
  const auto j = CitesSourceJudge::create({});
  Event e = withContexts("Five years [doc-7].", 0);
  e.contexts = {Context{"doc-3", "a", ""}, Context{"doc-7", "b", ""}};
  CHECK(passes(*j, e));
  CHECK(j->judge(e).evidence == "cites [doc-7]");
  e.answer = "Five years [doc-9].";
  CHECK_FALSE(passes(*j, e));
  e.answer = "Five years (doc-7)";  // an id outside brackets is not a marker
  CHECK_FALSE(passes(*j, e));
}

TEST_CASE("cites_source: a context's source URL written out") {
  const auto j = CitesSourceJudge::create({});
  Event e = answerOnly("See https://example.com/warranty for the terms.");
  e.contexts = {Context{"", "chunk", "https://example.com/faq"},
                Context{"", "chunk", "https://example.com/warranty"}};
  CHECK(passes(*j, e));
  e.answer = "See https://example.com/pricing for the terms.";
  CHECK_FALSE(passes(*j, e));
}

TEST_CASE("cites_source: configured patterns") {
  const auto plain = CitesSourceJudge::create({});
  const auto j = make<CitesSourceJudge>({{"patterns", Strings{R"(Source:\s*\w+)"}}});
  const auto e = withContexts("The warranty lasts five years. source: handbook", 2);
  CHECK_FALSE(passes(*plain, e));
  CHECK(passes(*j, e));  // case-insensitive
  CHECK(j->judge(e).evidence == "matches a citation pattern");
  CHECK_FALSE(passes(*j, withContexts("The warranty lasts five years.", 2)));
  CHECK(optionErrorKey<CitesSourceJudge>({{"patterns", Strings{"(unclosed"}}}) == "patterns");
  // At most 32 patterns (each scans the whole answer), for cites_source and refusal alike.
  Strings many;
  for (int i = 0; i < 33; ++i) many.push_back("cite" + std::to_string(i));
  CHECK(optionErrorKey<CitesSourceJudge>({{"patterns", many}}) == "patterns");
  CHECK(optionErrorKey<RefusalJudge>({{"patterns", many}}) == "patterns");
  many.pop_back();
  CHECK(passes(*make<CitesSourceJudge>({{"patterns", many}}),
               withContexts("The warranty lasts five years (cite31).", 2)));
}

TEST_CASE("cites_source: no contexts is no_context") {
  const auto v = CitesSourceJudge::create({})->judge(answerOnly("Five years [1]."));
  CHECK(v.outcome == Outcome::kNoContext);
  CHECK_FALSE(v.score.has_value());
  CHECK_FALSE(v.passed.has_value());
}

// ---- context_count -----------------------------------------------------------------------------

TEST_CASE("context_count: default min 1, no max") {
  const auto j = ContextCountJudge::create({});
  CHECK_FALSE(passes(*j, withContexts("a", 0)));
  CHECK(passes(*j, withContexts("a", 1)));
  CHECK(passes(*j, withContexts("a", 50)));
  CHECK(j->judge(withContexts("a", 0)).evidence == "0 contexts");
}

TEST_CASE("context_count: min and max") {
  const auto j = make<ContextCountJudge>({{"min", std::int64_t{2}}, {"max", std::int64_t{4}}});
  CHECK_FALSE(passes(*j, withContexts("a", 1)));
  CHECK(passes(*j, withContexts("a", 2)));
  CHECK(passes(*j, withContexts("a", 4)));
  CHECK_FALSE(passes(*j, withContexts("a", 5)));
  const auto zero = make<ContextCountJudge>({{"min", std::int64_t{0}}});
  CHECK(passes(*zero, withContexts("a", 0)));
  CHECK(optionErrorKey<ContextCountJudge>({{"min", std::int64_t{3}}, {"max", std::int64_t{2}}}) ==
        "max");
  CHECK(optionErrorKey<ContextCountJudge>({{"min", std::int64_t{-1}}}) == "min");
  CHECK(optionErrorKey<ContextCountJudge>({{"max", std::int64_t{-1}}}) == "max");
}

// ---- answer_length -----------------------------------------------------------------------------

TEST_CASE("answer_length counts code points") {
  const auto j =
      make<AnswerLengthJudge>({{"min_chars", std::int64_t{4}}, {"max_chars", std::int64_t{4}}});
  CHECK(passes(*j, answerOnly("café")));  // 4 code points, 5 bytes
  CHECK(j->judge(answerOnly("café")).evidence == "4 chars");
  CHECK_FALSE(passes(*j, answerOnly("cafés")));
  CHECK_FALSE(passes(*j, answerOnly("caf")));

  const auto cjk = make<AnswerLengthJudge>({{"max_chars", std::int64_t{5}}});
  CHECK_FALSE(passes(*cjk, answerOnly("会议改到周三")));  // 6 code points, 18 bytes
  CHECK(passes(*cjk, answerOnly("会议改到周")));

  const auto dflt = AnswerLengthJudge::create({});  // min 1, no max
  CHECK_FALSE(passes(*dflt, answerOnly("")));
  CHECK(passes(*dflt, answerOnly("x")));
  CHECK(passes(*dflt, answerOnly(std::string(100000, 'x'))));

  CHECK(optionErrorKey<AnswerLengthJudge>(
            {{"min_chars", std::int64_t{10}}, {"max_chars", std::int64_t{5}}}) == "max_chars");
  CHECK(optionErrorKey<AnswerLengthJudge>({{"min_chars", std::int64_t{-1}}}) == "min_chars");
}

// ---- refusal -----------------------------------------------------------------------------------

TEST_CASE("refusal: English and French phrases are labelled 1") {
  const auto j = RefusalJudge::create({});
  for (const char* answer :
       {"I don't know.", "I don\u2019t know", "I DO NOT KNOW the answer.",
        "I'm sorry, but the documents do not say.", "The provided context does not mention it.",
        "Je ne sais pas.", "Je n\u2019ai pas d\u2019information sur ce sujet.",
        "Désolé, je ne peux pas répondre.", "Je suis désolée, aucune information ici."}) {
    CAPTURE(answer);
    const auto v = j->judge(answerOnly(answer));
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(*v.score == 1.0);
    CHECK_FALSE(v.passed.has_value());  // a label, not a pass/fail
    CHECK(v.evidence.rfind("says \"", 0) == 0);
  }
  const auto* refusal = dynamic_cast<const RefusalJudge*>(j.get());
  REQUIRE(refusal != nullptr);
  CHECK(refusal->matchedPhrase("I don\u2019t know") == "i don't know");
  CHECK(refusal->matchedPhrase("Je ne sais pas") == "je ne sais pas");
}

TEST_CASE("refusal: every answer the abstention detector calls abstained is a refusal") {
  // The two agree (judges/abstention.hpp): claim_support's `abstained` answers are labelled 1.
  const auto j = RefusalJudge::create({});
  const auto* refusal = dynamic_cast<const RefusalJudge*>(j.get());
  REQUIRE(refusal != nullptr);
  for (const char* answer :
       {"Not stated in the documents.", "The passages do not specify the year.",
        "This cannot be inferred.", "There is no mention of it in the sources.",
        "Additional information is required.", "Le texte ne précise pas la date.",
        "Ce n'est pas mentionné."}) {
    CAPTURE(answer);
    REQUIRE(answerAbstains(answer));
    CHECK(*j->judge(answerOnly(answer)).score == 1.0);
  }
  CHECK(refusal->matchedPhrase("Not stated in the documents.") == "not stated in the documents");
  // Surprise at a fact is neither.
  CHECK_FALSE(answerAbstains("I had no idea he died in 1990."));
  CHECK(*j->judge(answerOnly("I had no idea he died in 1990.")).score == 0.0);
}

TEST_CASE("refusal: ordinary answers are labelled 0") {
  const auto j = RefusalJudge::create({});
  for (const char* answer : {"The warranty lasts five years.", "La garantie dure cinq ans.",
                             "I know the answer: five years.", ""}) {
    CAPTURE(answer);
    const auto v = j->judge(answerOnly(answer));
    CHECK(v.outcome == Outcome::kOk);
    REQUIRE(v.score.has_value());
    CHECK(*v.score == 0.0);
    CHECK(v.evidence.empty());
  }
}

TEST_CASE("refusal: configured patterns") {
  const auto j = make<RefusalJudge>({{"patterns", Strings{R"(no\s+comment)"}}});
  CHECK(*j->judge(answerOnly("No comment.")).score == 1.0);
  CHECK(*RefusalJudge::create({})->judge(answerOnly("No comment.")).score == 0.0);
  CHECK(optionErrorKey<RefusalJudge>({{"patterns", Strings{"[a-"}}}) == "patterns");
  // RE2 syntax: a backreference (which would need backtracking) is refused at load.
  CHECK(optionErrorKey<RefusalJudge>({{"patterns", Strings{R"((a)\1)"}}}) == "patterns");
}

TEST_CASE("user patterns on hostile answers: linear time, no stack to overflow") {
  // (a+)+b backtracks exponentially in std::regex on a run of a's with no b, and a long
  // answer overflows its recursive matcher: with RE2 both are one linear pass.
  const auto j = make<CitesSourceJudge>({{"patterns", Strings{"(a+)+b", "(.|\\n)*z"}}});
  const auto hostile = withContexts(std::string(1 << 20, 'a') + "!", 1);
  CHECK_FALSE(passes(*j, hostile));
  const auto r = make<RefusalJudge>({{"patterns", Strings{"(x+x+)+y"}}});
  CHECK(*r->judge(answerOnly(std::string(1 << 20, 'x'))).score == 0.0);
  CHECK(*r->judge(answerOnly(std::string(100, 'x') + "y")).score == 1.0);
}

// ---- json_valid --------------------------------------------------------------------------------

TEST_CASE("json_valid: not_applicable for text answers") {
  const auto v = JsonValidJudge::create({})->judge(answerOnly("{not json at all"));
  CHECK(v.outcome == Outcome::kNotApplicable);
  CHECK_FALSE(v.score.has_value());
  CHECK_FALSE(v.passed.has_value());
}

TEST_CASE("json_valid: syntax only") {
  const auto j = JsonValidJudge::create({});
  CHECK(passes(*j, jsonAnswer(R"({"answer": "five years", "sources": [1]})")));
  CHECK(passes(*j, jsonAnswer("[1, 2, 3]")));
  CHECK(passes(*j, jsonAnswer("  \"a string\"  ")));
  CHECK(passes(*j, jsonAnswer("42")));
  CHECK_FALSE(passes(*j, jsonAnswer("")));
  CHECK_FALSE(passes(*j, jsonAnswer("{'answer': 'single quotes'}")));
  CHECK_FALSE(passes(*j, jsonAnswer(R"({"answer": "five years",})")));  // trailing comma
  CHECK_FALSE(passes(*j, jsonAnswer(R"({"a": 1} {"b": 2})")));          // two values
  CHECK_FALSE(passes(*j, jsonAnswer("Here is the JSON: {\"a\": 1}")));
  CHECK(j->judge(jsonAnswer("{")).evidence.rfind("not JSON at offset", 0) == 0);
}

TEST_CASE("json_valid: with a JSON Schema") {
  const auto j = make<JsonValidJudge>({{"schema_file", kDataDir + "/answer_schema.json"}});
  CHECK(passes(*j, jsonAnswer(R"({"answer": "five years", "sources": [1, 2]})")));
  CHECK(passes(*j, jsonAnswer(R"({"answer": "five years", "sources": []})")));
  // Parses, but violates the schema: missing "sources", wrong type, extra key, not an object.
  CHECK_FALSE(passes(*j, jsonAnswer(R"({"answer": "five years"})")));
  CHECK_FALSE(passes(*j, jsonAnswer(R"({"answer": "five years", "sources": ["doc-1"]})")));
  CHECK_FALSE(passes(*j, jsonAnswer(R"({"answer": "x", "sources": [], "extra": true})")));
  CHECK_FALSE(passes(*j, jsonAnswer(R"({"answer": "", "sources": []})")));
  CHECK_FALSE(passes(*j, jsonAnswer("[1, 2]")));
  CHECK_FALSE(passes(*j, jsonAnswer("{")));
  const auto v = j->judge(jsonAnswer(R"({"answer": "five years"})"));
  CHECK(v.evidence.find("required") != std::string::npos);
  // Still not applicable to text answers.
  CHECK(j->judge(answerOnly("{}")).outcome == Outcome::kNotApplicable);
}

TEST_CASE("json_valid: an unreadable or non-JSON schema_file is an OptionError") {
  CHECK(optionErrorKey<JsonValidJudge>({{"schema_file", kDataDir + "/does_not_exist.json"}}) ==
        "schema_file");
  CHECK(optionErrorKey<JsonValidJudge>({{"schema_file", kDataDir + "/not_json_schema.txt"}}) ==
        "schema_file");
  // A device or a FIFO is refused without blocking; a schema nested past the JSON depth bound
  // is refused before RapidJSON's recursive parser sees it.
  const auto message = [](const std::string& file) {
    try {
      JsonValidJudge j(JsonValidOptions{file});
    } catch (const OptionError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message("/dev/zero").find("'/dev/zero' is a character device, not a regular file") !=
        std::string::npos);
  const std::string deep = std::filesystem::temp_directory_path() / "assay-deep-schema.json";
  std::ofstream(deep) << std::string(100'000, '[') << std::string(100'000, ']');
  CHECK(message(deep).find("nested deeper than 128") != std::string::npos);
  // A $ref cycle through $ref only: RapidJSON recursed until SIGSEGV (start-up, SIGHUP).
  for (const char* cycle : {R"({"$ref": "#"})",
                            R"({"definitions": {"a": {"$ref": "#/definitions/b"},
                                "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"})"}) {
    std::ofstream(deep) << cycle;
    CHECK(message(deep).find("leads back to itself") != std::string::npos);
  }
  // A recursive schema (a tree) is not a cycle of refs: accepted.
  std::ofstream(deep) << R"({"type": "object", "properties": {"child": {"$ref": "#"}}})";
  CHECK(message(deep) == "no error");
  std::filesystem::remove(deep);
}

TEST_CASE("a user's pattern whose RE2 program is over 1,000 instructions is refused at load") {
  CHECK(optionErrorKey<CitesSourceJudge>({{"patterns", Strings{R"(\pL{100}z)"}}}) == "patterns");
  CHECK(optionErrorKey<RefusalJudge>({{"patterns", Strings{R"((\w+\s+){200}x)"}}}) == "patterns");
  try {
    make<CitesSourceJudge>({{"patterns", Strings{R"(\pL{100}z)"}}});
    FAIL("accepted");
  } catch (const OptionError& e) {
    CHECK(std::string(e.what()).find("over the 1000 allowed") != std::string::npos);
  }
  // Typical patterns stay well under it.
  CHECK(make<CitesSourceJudge>(
            {{"patterns", Strings{R"(Source:\s*\w+)", R"((?i)according to .{0,40})"}}}) != nullptr);
}

TEST_CASE("refusal: upper-case French is recognised") {
  const auto j = RefusalJudge::create(JudgeOptionValues{});
  Event e;
  e.answer = std::string("JE SUIS DÉSOLÉE, je ne trouve rien.");
  CHECK(j->judge(e).score == 1.0);
}

TEST_CASE("json_valid: an answer nested 300,000 deep fails the check, never crashes a worker") {
  const auto j = JsonValidJudge::create(JudgeOptionValues{});
  const Verdict v = j->judge(jsonAnswer(std::string(300'000, '[')));
  CHECK(v.passed == false);
  CHECK(v.evidence.find("nested deeper than 128") != std::string::npos);
  CHECK(j->judge(jsonAnswer(std::string(100, '[') + std::string(100, ']'))).passed == true);
}

}  // namespace assay
