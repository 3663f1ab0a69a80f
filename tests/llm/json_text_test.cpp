#include "judges/llm/json_text.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <random>
#include <string>

using namespace assay::llm;

namespace {

/// What RapidJSON's writer makes of `s` (the reference appendJsonString must equal).
std::string rapidjsonString(const std::string& s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return {buf.GetString(), buf.GetSize()};
}

std::string ours(const std::string& s, const std::string& before = "") {
  std::string out = before;
  appendJsonString(out, s);
  return out.substr(before.size());
}

}  // namespace

TEST_CASE("appendJsonString: every byte, at every offset of the 16- and 8-byte steps") {
  CHECK(ours("") == "\"\"");
  CHECK(ours("a\"b\\c/d\x7F") == "\"a\\\"b\\\\c/d\x7F\"");
  CHECK(ours(std::string("\b\t\n\f\r\x01\x1F\0", 8)) == "\"\\b\\t\\n\\f\\r\\u0001\\u001F\\u0000\"");
  for (int c = 0; c < 256; ++c) {
    for (std::size_t at = 0; at < 40; ++at) {
      std::string s(40, 'a');
      s[at] = static_cast<char>(c);
      INFO("byte " << c << " at " << at);
      REQUIRE(ours(s) == rapidjsonString(s));
    }
  }
}

TEST_CASE("appendJsonString: random bytes and text, the same as RapidJSON's writer") {
  std::mt19937 rng(33);
  const std::string alphabet =
      "abc \"\\/\n\t\r\x01\x1F\x7F\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80{}[]:,";
  for (int i = 0; i < 3000; ++i) {
    const std::size_t n = rng() % 300;
    std::string s(n, '\0');
    const bool raw = i % 2 == 0;  // any byte, or mostly text with the bytes that need escapes
    for (auto& ch : s)
      ch = raw ? static_cast<char>(rng() & 0xFF) : alphabet[rng() % alphabet.size()];
    INFO("string " << i);
    REQUIRE(ours(s, "prefix:") == rapidjsonString(s));
    // Valid JSON whenever the input is valid UTF-8: it reads back as the input.
    if (!raw && s.find('\xC3') == std::string::npos && s.find('\xE2') == std::string::npos &&
        s.find('\xF0') == std::string::npos) {
      rapidjson::Document d;
      const std::string json = ours(s);
      d.Parse(json.data(), json.size());
      REQUIRE_FALSE(d.HasParseError());
      CHECK(std::string(d.GetString(), d.GetStringLength()) == s);
    }
  }
  // A long run with no escape then one at the very end, and the reverse.
  const std::string tail = std::string(4099, 'w') + "\"";
  CHECK(ours(tail) == rapidjsonString(tail));
  const std::string head = "\n" + std::string(4099, 'w');
  CHECK(ours(head) == rapidjsonString(head));
}
