#include "core/utf8.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/encodings.h>
#include <rapidjson/memorystream.h>

#include <optional>
#include <random>
#include <string>
#include <utility>

#include "core/json_limits.hpp"
#include "core/log_text.hpp"

using namespace assay;

namespace {

/// RapidJSON's validator, the reference: whole text well-formed.
bool rapidjsonValid(std::string_view s) {
  rapidjson::MemoryStream is(s.data(), s.size());
  struct NullOut {
    void Put(char) {}
  } os;
  while (is.Tell() < s.size())
    if (!rapidjson::UTF8<>::Validate(is, os)) return false;
  return true;
}

/// The JSON text {"a":"<body>"}.
std::string member(const std::string& body) { return "{\"a\":\"" + body + "\"}"; }

}  // namespace

TEST_CASE("utf8: every sequence of 1 to 3 bytes agrees with RapidJSON's validator") {
  long valid = 0, disagreements = 0;
  std::string s;
  for (unsigned a = 0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; ++b) {
      for (unsigned c = 0; c < 256; ++c) {
        s.assign({static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)});
        const bool ours = isValidUtf8(s);
        valid += ours;
        disagreements += ours != rapidjsonValid(s);
      }
    }
  }
  CHECK(disagreements == 0);
  // Unicode's count of well-formed 3-byte strings: (1-byte)^3 + 2×(1-byte × 2-byte) + 3-byte
  // = 128^3 + 2 × 128 × 1,920 + 61,440 (63,488 minus the 2,048 surrogates).
  CHECK(valid == 128L * 128 * 128 + 2L * 128 * 1920 + 61440);
}

TEST_CASE("utf8: the table's edges, and the offset of the first ill-formed byte") {
  CHECK(isValidUtf8(""));
  CHECK(isValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK(isValidUtf8("\xf4\x8f\xbf\xbf"));        // U+10FFFF, the last code point
  CHECK_FALSE(isValidUtf8("\xf4\x90\x80\x80"));  // U+110000
  CHECK_FALSE(isValidUtf8("\xed\xa0\x80"));      // U+D800 encoded (CESU)
  CHECK_FALSE(isValidUtf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(isValidUtf8("\xe0\x80\xaf"));      // overlong, 3 bytes
  CHECK_FALSE(isValidUtf8("\xf0\x80\x80\xaf"));  // overlong, 4 bytes
  CHECK_FALSE(isValidUtf8("\xe2\x82"));          // truncated
  CHECK_FALSE(isValidUtf8("\x80"));              // a stray continuation byte
  CHECK_FALSE(isValidUtf8("\xf5\x80\x80\x80"));  // F5 never appears
  CHECK(firstInvalidUtf8("ab\xc3\xa9\xff") == 4);
  CHECK(firstInvalidUtf8("ab") == 2);
  for (unsigned lead = 0xF0; lead <= 0xF4; ++lead)  // every 4-byte lead, both sides of its
    for (unsigned second = 0x80; second <= 0xBF; ++second) {  // second byte's range
      const std::string s{static_cast<char>(lead), static_cast<char>(second), '\x80', '\x80'};
      CHECK(isValidUtf8(s) == rapidjsonValid(s));
    }
}

TEST_CASE("jsonShapeProblem: invalid UTF-8 and an escape of half a surrogate pair") {
  using Kind = JsonShapeProblem::Kind;
  // RapidJSON 1.1 takes a lone second half and decodes it into ED B0 80, which is not UTF-8:
  // the check is what stops it.
  rapidjson::Document d;
  d.Parse(member("acme\\udc00").c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK_FALSE(isValidUtf8(std::string_view(d["a"].GetString(), d["a"].GetStringLength())));

  const auto kind = [](const std::string& text) {
    const auto p = jsonShapeProblem(text);
    return p ? std::optional(p->kind) : std::nullopt;
  };
  CHECK(kind(member("acme\\udc00")) == Kind::kLoneSurrogate);
  CHECK(jsonShapeProblem(member("acme\\udc00"))->offset == 10);
  CHECK(kind(member("\\uDFFF")) == Kind::kLoneSurrogate);
  CHECK(kind(member("\\ud800")) == Kind::kLoneSurrogate);         // first half, then the end
  CHECK(kind(member("\\ud800x")) == Kind::kLoneSurrogate);        // then a character
  CHECK(kind(member("\\ud800\\n")) == Kind::kLoneSurrogate);      // then another escape
  CHECK(kind(member("\\ud800\\ud800")) == Kind::kLoneSurrogate);  // then another first half
  CHECK(kind(member("\\ud800\\udc0")) == Kind::kLoneSurrogate);   // a truncated second half
  CHECK(kind(member("\\udbff\\udfff and \\ud83d\\ude00")) == std::nullopt);  // two pairs
  CHECK(kind(member("\\u00e9 \\u20ac \\uffff \\uD7FF \\uE000")) == std::nullopt);
  CHECK(kind(member("\\\\udc00")) == std::nullopt);        // an escaped backslash, then text
  CHECK(kind("{\"\\udc00\":1}") == Kind::kLoneSurrogate);  // in a name too
  CHECK(kind(member("caf\xff")) == Kind::kNotUtf8);
  CHECK(jsonShapeProblem(member("caf\xff"))->offset == 9);
  CHECK(kind(member("\xed\xa0\x80")) == Kind::kNotUtf8);
  CHECK(jsonShapeProblem(member("\\udc00"))->message() ==
        "a \\u escape of half a surrogate pair at byte 6 (not a character)");
}

namespace {
/// The byte-at-a-time forms that the word-at-a-time ones replaced: the reference.
std::size_t referenceInvalidUtf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8SequenceLength(text, i);
    if (n == 0) return i;
    i += n;
  }
  return text.size();
}
std::optional<std::pair<JsonShapeProblem::Kind, std::size_t>> referenceShape(
    std::string_view text) {
  using json_limits_detail::hex4;
  using Kind = JsonShapeProblem::Kind;
  if (const auto bad = referenceInvalidUtf8(text); bad < text.size())
    return std::pair(Kind::kNotUtf8, bad);
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\0') return std::pair(Kind::kNulByte, i);
    if (in_string) {
      if (escaped) {
        escaped = false;
        const long u = c == 'u' ? hex4(text, i + 1) : -1;
        if (u >= 0xDC00 && u <= 0xDFFF) return std::pair(Kind::kLoneSurrogate, i - 1);
        if (u >= 0xD800 && u <= 0xDBFF) {
          const bool next = i + 6 < text.size() && text[i + 5] == '\\' && text[i + 6] == 'u';
          const long low = next ? hex4(text, i + 7) : -1;
          if (low < 0xDC00 || low > 0xDFFF) return std::pair(Kind::kLoneSurrogate, i - 1);
          i += 10;
        }
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return std::pair(Kind::kTooDeep, i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}
}  // namespace

TEST_CASE("firstInvalidUtf8 and jsonShapeProblem: the same answers as byte by byte") {
  std::mt19937 rng(7);
  // Mostly ASCII JSON with every byte that matters, at every alignment.
  const std::string alphabet =
      "abcdefgh \"\"\"\\\\u00dcd800udc00DBFF{}[]{}[],:\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff\x80";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 120, 'x');
    const int kind = i % 4;
    for (auto& ch : s)
      ch = kind == 0   ? static_cast<char>(rng() & 0xFF)
           : kind == 1 ? alphabet[rng() % alphabet.size()]
                       : (rng() % 16 == 0 ? alphabet[rng() % alphabet.size()] : 'w');
    if (kind == 3 && !s.empty()) s[rng() % s.size()] = '\0';
    INFO("string " << i);
    REQUIRE(firstInvalidUtf8(s) == referenceInvalidUtf8(s));
    const auto ours = jsonShapeProblem(s);
    const auto ref = referenceShape(s);
    REQUIRE(ours.has_value() == ref.has_value());
    if (ours) {
      CHECK(ours->kind == ref->first);
      CHECK(ours->offset == ref->second);
    }
  }
  // Deep nesting past the limit inside a long text, and a NUL after a long string.
  const std::string deep =
      "{\"a\":\"" + std::string(100, 'w') + "\"," + std::string(kMaxJsonDepth + 1, '[');
  CHECK(jsonShapeProblem(deep)->kind == JsonShapeProblem::Kind::kTooDeep);
  const std::string nul = member(std::string(37, 'w') + std::string(1, '\0'));
  CHECK(jsonShapeProblem(nul)->offset == 43);
}

TEST_CASE("logText: bytes that are not UTF-8 are escaped, so a log line is always UTF-8") {
  CHECK(logText("caf\xff") == "caf\\xff");
  CHECK(logText("\xed\xa0\x80!") == "\\xed\\xa0\\x80!");
  CHECK(logText("\xe2\x82 \xe2\x82\xac") == "\\xe2\\x82 \xe2\x82\xac");
  CHECK(isValidUtf8(logText(std::string(300, '\x80'), 64)));
  CHECK(logText(std::string(300, '\x80'), 64) == [] {
    std::string s;
    for (int i = 0; i < 61; ++i) s += "\\x80";  // cut back at most 3 bytes: 64 - 3
    return s + "…";
  }());
}

TEST_CASE("utf8Clean: ill-formed bytes become U+FFFD, and a cut falls between characters") {
  CHECK(utf8Clean("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(utf8Clean("a\xff"
                  "b\xed\xa0\x80") ==
        "a\xef\xbf\xbd"
        "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  std::string euros;
  for (int i = 0; i < 10; ++i) euros += "\u20ac";
  CHECK(utf8Clean(euros, 10) == euros.substr(0, 9) + "\u2026");  // 3 of 3 bytes each: 9 fit
  CHECK(utf8Clean(euros, 30) == euros);
  CHECK(isValidUtf8(utf8Clean(std::string(100, '\x80'), 50)));
}
