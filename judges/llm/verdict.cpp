#include "judges/llm/verdict.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/schema.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "core/json_limits.hpp"
#include "core/log_text.hpp"
#include "core/utf8.hpp"

namespace assay::llm {
namespace {

std::string_view trim(std::string_view s) {
  const auto ws = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

/// Removes what reasoning models and some gateways put before the object: a UTF-8 byte-order
/// mark, and one leading `<think>…</think>` block (DeepSeek-R1, Qwen3 and other open reasoning
/// models through OpenAI-compatible servers), with the white space after it; or, when the chat
/// template opened the block itself so that the reply holds only its end ("…reasoning…\n
/// </think>\n{verdict}", DeepSeek-R1, QwQ and Qwen3 served that way), the reasoning up to the
/// first `</think>` of a reply that does not start with the object.
std::string_view stripPreamble(std::string_view s) {
  if (s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);
  const std::string_view t = trim(s);
  if (t.substr(0, 7) == "<think>") {
    const auto end = t.find("</think>");
    if (end != std::string_view::npos) return trim(t.substr(end + 8));
  } else if (!t.empty() && t.front() != '{' && t.front() != '`') {
    const auto end = t.find("</think>");
    if (end != std::string_view::npos && t.substr(0, end).find("<think>") == std::string_view::npos)
      return trim(t.substr(end + 8));
  }
  return s;
}

/// The first member name that occurs twice in an object of `v` (at any depth), or "". RapidJSON
/// keeps both members and FindMember returns the first, so {"score": 1, "score": 4} would be
/// read as 1 while the model may have meant 4: refused instead. Depth is bounded by
/// jsonShapeProblem before parsing.
std::string duplicateKey(const rapidjson::Value& v) {
  if (v.IsObject()) {
    std::set<std::string_view> seen;
    for (const auto& m : v.GetObject()) {
      if (!seen.insert(std::string_view(m.name.GetString(), m.name.GetStringLength())).second)
        return std::string(m.name.GetString(), m.name.GetStringLength());
      if (auto d = duplicateKey(m.value); !d.empty()) return d;
    }
  } else if (v.IsArray()) {
    for (const auto& e : v.GetArray())
      if (auto d = duplicateKey(e); !d.empty()) return d;
  }
  return "";
}

/// Removes one markdown fence around the whole text: ```json\n … \n``` (info string json,
/// JSON or none). What is inside is left to the JSON parser, so a justification that itself
/// contains a fence (``` inside a JSON string) still parses, while a second fenced block after
/// the first is text after the object: an error.
std::string_view stripFence(std::string_view s) {
  s = trim(s);
  if (s.size() < 6 || s.substr(0, 3) != "```" || s.substr(s.size() - 3) != "```") return s;
  const auto first_newline = s.find('\n');
  if (first_newline == std::string_view::npos || first_newline + 3 > s.size() - 3) return s;
  const std::string_view info = trim(s.substr(3, first_newline - 3));
  if (!info.empty() && info != "json" && info != "JSON") return s;
  return trim(s.substr(first_newline + 1, s.size() - 3 - (first_newline + 1)));
}

/// Phrases that open or carry a refusal, lower case, with ' for U+2019. English and French
/// (the languages of the dev data), Spanish and German. Read only in a reply that holds no
/// verdict, so "I won't" in a justification never turns a score into a refusal.
constexpr std::string_view kRefusalPhrases[] = {
    // English
    "i can't help", "i cannot help", "i can not help", "i can't assist", "i cannot assist",
    "i'm sorry, but", "i am sorry, but", "sorry, but i", "sorry, i can't", "i apologize, but",
    "i won't", "i will not", "unable to comply", "i can't comply", "i cannot comply",
    "i'm unable to", "i am unable to", "i'm not able to", "i am not able to", "i can't provide",
    "i cannot provide", "i can't evaluate", "i cannot evaluate", "i must decline",
    "i have to decline", "i'm afraid i can't", "i'm not comfortable", "as an ai",
    // French
    "je ne peux pas", "je ne peux malheureusement pas", "je suis désolé", "désolé, mais",
    "désolée, mais", "je ne suis pas en mesure", "il m'est impossible", "je dois refuser",
    "je refuse de", "je ne vais pas pouvoir", "je ne pourrai pas",
    // Spanish, German
    "lo siento, pero", "no puedo ayudar", "no puedo evaluar", "es tut mir leid",
    "ich kann dabei nicht"};

bool looksLikeRefusal(std::string_view text) {
  // ASCII lower case on the first 400 bytes (the French phrases are matched in the lower case
  // they are written in; a capital É is rare at a refusal's start and stays unmatched).
  std::string lower(text.substr(0, 400));
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) {
    return c < 0x80 ? static_cast<char>(std::tolower(c)) : static_cast<char>(c);
  });
  for (std::size_t at; (at = lower.find("\xE2\x80\x99")) != std::string::npos;)
    lower.replace(at, 3, "'");  // U+2019 typographic apostrophe
  for (auto p : kRefusalPhrases)
    if (lower.find(p) != std::string::npos) return true;
  return false;
}

/// A JSON object without a score whose `refusal` member, or any top-level string, reads as a
/// refusal: {"refusal": "I can't evaluate this."} or {"justification": "Je ne peux pas…"}.
bool objectRefuses(const rapidjson::Value& d) {
  if (!d.IsObject() || d.HasMember("score")) return false;
  if (auto r = d.FindMember("refusal");
      r != d.MemberEnd() && r->value.IsString() && r->value.GetStringLength() > 0)
    return true;
  for (const auto& m : d.GetObject())
    if (m.value.IsString() &&
        looksLikeRefusal(std::string_view(m.value.GetString(), m.value.GetStringLength())))
      return true;
  return false;
}

/// A claim that says there is none.
bool noClaim(std::string_view c) {
  c = trim(c);
  std::string lower(c.substr(0, 8));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return c.size() <= 8 && (lower.empty() || lower == "none" || lower == "null" || lower == "n/a" ||
                           lower == "none." || lower == "nothing");
}

/// At most kMaxJustificationBytes of valid UTF-8, cut on a character boundary, "…" added when
/// cut.
std::string capped(std::string_view text) { return utf8Clean(text, kMaxJustificationBytes); }

LlmVerdict fail(Outcome o, std::string why) {
  LlmVerdict v;
  v.outcome = o;
  v.justification = std::move(why);
  return v;
}

/// Replies up to this size use the schema's kept validator (compiledSchema).
constexpr std::size_t kSharedValidatorBytes = std::size_t{64} * 1024;

/// A schema compiled, with one validator for it (Reset() between documents: constructing a
/// validator took 20 allocations a reply).
struct Compiled {
  rapidjson::Document doc;  // the SchemaDocument points into it
  std::unique_ptr<rapidjson::SchemaDocument> compiled;
  std::unique_ptr<rapidjson::SchemaValidator> validator;
};

std::unique_ptr<Compiled> compile(const std::string& schema) {
  auto c = std::make_unique<Compiled>();
  c->doc.Parse(schema.c_str());
  if (c->doc.HasParseError()) throw std::invalid_argument("parseSchemaObject: schema is not JSON");
  c->compiled = std::make_unique<rapidjson::SchemaDocument>(c->doc);
  c->validator = std::make_unique<rapidjson::SchemaValidator>(*c->compiled);
  return c;
}

/// The schema `text()` names by `key`, compiled once per thread: compiling the verdict schema
/// for every reply was 4 % of the dispatch's CPU. A judge has one or two schemas; at most 16
/// are kept per map.
template <class Map, class Text>
Compiled& kept(Map& map, const typename Map::key_type& key, Text text) {
  if (const auto it = map.find(key); it != map.end()) return *it->second;
  auto c = compile(text());
  if (map.size() >= 16) map.clear();
  return *map.emplace(key, std::move(c)).first->second;
}

/// A schema given as text (parseSchemaObject), kept by its text.
Compiled& compiledSchema(const std::string& schema) {
  thread_local std::unordered_map<std::string, std::unique_ptr<Compiled>> map;
  return kept(map, schema, [&] { return schema; });
}

/// The verdict schema of a min..max rubric, kept by its range: no schema text is built or
/// hashed per reply.
Compiled& compiledVerdictSchema(int min_score, int max_score) {
  thread_local std::map<std::pair<int, int>, std::unique_ptr<Compiled>> map;
  return kept(map, {min_score, max_score}, [&] { return verdictSchema(min_score, max_score); });
}

std::string parseAgainst(std::string_view content, Compiled& schema, rapidjson::Document& out) {
  const std::string_view body = stripFence(stripPreamble(content));
  if (body.empty()) return "empty reply";
  if (body.front() != '{') return "reply is not a JSON object";
  if (const auto shape = jsonShapeProblem(body)) return "not accepted as JSON: " + shape->message();
  // kParseStopWhenDoneFlag is not used: text after the object is an error, not ignored.
  out.Parse(body.data(), body.size());
  if (out.HasParseError()) {
    std::string why = std::string("not JSON: ") + rapidjson::GetParseError_En(out.GetParseError()) +
                      " at byte " + std::to_string(out.GetErrorOffset());
    out.SetNull();
    return why;
  }
  if (const auto key = duplicateKey(out); !key.empty()) {
    out.SetNull();
    return "the key \"" + utf8Clean(key, 60) + "\" occurs twice in one object";
  }
  const auto validate = [&out](rapidjson::SchemaValidator& validator) -> std::string {
    if (out.Accept(validator)) return {};
    rapidjson::StringBuffer where;
    validator.GetInvalidDocumentPointer().StringifyUriFragment(where);
    return std::string("violates the schema ('") + validator.GetInvalidSchemaKeyword() + "' at " +
           where.GetString() + ")";
  };
  // The kept validator holds on to the memory a document made it take (about twice its longest
  // key, not given back by Reset()): a reply over 64 KiB gets a validator of its own, freed
  // with it, so that one 16 MiB key does not stay held by the thread.
  if (body.size() > kSharedValidatorBytes) {
    rapidjson::SchemaValidator own(*schema.compiled);
    return validate(own);
  }
  schema.validator->Reset();
  std::string why = validate(*schema.validator);
  schema.validator->Reset();
  return why;
}

}  // namespace

std::string parseSchemaObject(std::string_view content, const std::string& schema,
                              rapidjson::Document& out) {
  return parseAgainst(content, compiledSchema(schema), out);
}

std::string verdictSchema(int min_score, int max_score) {
  const std::string lo = std::to_string(min_score), hi = std::to_string(max_score);
  return R"({"type":"object",)"
         R"("required":["score","justification"],)"
         R"("properties":{)"
         // A whole number written as a float ("score": 2.0) is that integer.
         R"("score":{"anyOf":[{"type":"integer","minimum":)" +
         lo + R"(,"maximum":)" + hi + R"(},{"type":"number","multipleOf":1,"minimum":)" + lo +
         R"(,"maximum":)" + hi +
         R"(},{"type":"string","pattern":"^[0-9]{1,6}$"},{"type":"null"}]},)"
         R"("justification":{"type":"string"},)"
         R"("unsupported_claim":{"oneOf":[{"type":["string","null"]},)"
         R"({"type":"array","items":{"type":"string"}}]}}})";
}

LlmVerdict parseVerdict(std::string_view content, FinishReason finish, int min_score,
                        int max_score) {
  if (finish == FinishReason::kLength) return fail(Outcome::kTruncated, "reply cut at max_tokens");
  if (finish == FinishReason::kRefusal)
    return fail(Outcome::kRefused, "the provider flagged a refusal");
  rapidjson::Document d;
  if (std::string problem = parseAgainst(content, compiledVerdictSchema(min_score, max_score), d);
      !problem.empty()) {
    if (problem == "reply is not a JSON object") {
      const std::string_view body = stripFence(stripPreamble(content));
      if (body.find("\"score\"") == std::string_view::npos && looksLikeRefusal(body))
        return fail(Outcome::kRefused, utf8Clean(body, 200));
    }
    if (d.IsObject() && objectRefuses(d))
      return fail(Outcome::kRefused, "the verdict object declines to judge");
    if (problem.rfind("violates the schema", 0) == 0) problem.insert(13, "verdict ");
    return fail(Outcome::kSchemaError, std::move(problem));
  }
  const auto& s = d["score"];
  if (s.IsNull()) {  // the judge declines to score, and says why
    LlmVerdict v =
        fail(Outcome::kAbstained, capped(std::string_view(d["justification"].GetString(),
                                                          d["justification"].GetStringLength())));
    return v;
  }
  long score = 0;
  if (s.IsString()) {
    // Every byte a digit: the schema's pattern stops at a NUL ("3\u0000zz" passed it).
    const std::string_view digits(s.GetString(), s.GetStringLength());
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), score);
    if (ec != std::errc() || end != digits.data() + digits.size())
      return fail(Outcome::kSchemaError,
                  "score \"" + logText(digits, 20) + "\" is not a whole number of digits");
  } else if (s.IsInt64()) {
    score = static_cast<long>(s.GetInt64());
  } else {  // a whole float within the scale (the schema checked both)
    score = static_cast<long>(std::llround(s.GetDouble()));
  }
  if (score < min_score || score > max_score) {
    return fail(Outcome::kSchemaError, "score " + std::to_string(score) + " outside " +
                                           std::to_string(min_score) + ".." +
                                           std::to_string(max_score));
  }
  LlmVerdict v;
  v.outcome = Outcome::kOk;
  v.score = static_cast<int>(score);
  v.justification = capped(
      std::string_view(d["justification"].GetString(), d["justification"].GetStringLength()));
  // One claim, a list of claims (joined), or none: null, "", "None", "null", "N/A".
  std::string claim;
  if (const auto it = d.FindMember("unsupported_claim"); it != d.MemberEnd()) {
    if (it->value.IsString())
      claim.assign(it->value.GetString(), it->value.GetStringLength());
    else if (it->value.IsArray())
      for (const auto& c : it->value.GetArray())
        if (!noClaim(std::string_view(c.GetString(), c.GetStringLength())))
          claim += (claim.empty() ? "" : "; ") + std::string(c.GetString(), c.GetStringLength());
  }
  if (!noClaim(claim)) v.unsupported_claim = capped(claim);
  return v;
}

}  // namespace assay::llm
