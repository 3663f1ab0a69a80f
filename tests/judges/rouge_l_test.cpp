#include "judges/rouge_l.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "judges/tokenizer.hpp"

namespace assay {
namespace {

Event withReference(std::string answer, std::optional<std::string> reference) {
  Event e;
  e.question = std::string("q");  // not `= "q"`: GCC 12 -Wrestrict false positive (PR 105329)
  e.answer = std::move(answer);
  e.reference = std::move(reference);
  return e;
}

std::vector<std::string> chars(std::string_view s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

}  // namespace

TEST_CASE("lcsLength on the classic example and its symmetry") {
  // Cormen et al.: LCS of ABCBDAB and BDCABA has length 4 (e.g. BCBA).
  CHECK(lcsLength(chars("ABCBDAB"), chars("BDCABA")) == 4);
  CHECK(lcsLength(chars("BDCABA"), chars("ABCBDAB")) == 4);
  CHECK(lcsLength(chars("abc"), chars("abc")) == 3);
  CHECK(lcsLength(chars("abc"), chars("xyz")) == 0);
  CHECK(lcsLength({}, chars("abc")) == 0);
  CHECK(lcsLength(chars("abc"), {}) == 0);
  CHECK(lcsLength(chars("a"), chars("xxxxa")) == 1);
}

TEST_CASE("ROUGE-L: issue case, east coast office") {
  const auto s =
      rougeL(tokenize("east coast office opens at nine"), tokenize("the office opens at nine"));
  CHECK(s.lcs == 4);  // office opens at nine
  CHECK(s.precision == doctest::Approx(4.0 / 6.0).epsilon(1e-12));
  CHECK(s.recall == doctest::Approx(4.0 / 5.0).epsilon(1e-12));
  CHECK(s.f == doctest::Approx(8.0 / 11.0).epsilon(1e-12));  // 0.72727…
  CHECK(s.f == doctest::Approx(0.727).epsilon(1e-3));

  const auto v = RougeLJudge{}.judge(
      withReference("east coast office opens at nine", "the office opens at nine"));
  CHECK(v.outcome == Outcome::kOk);
  REQUIRE(v.score.has_value());
  CHECK(*v.score == doctest::Approx(8.0 / 11.0).epsilon(1e-12));
  CHECK_FALSE(v.passed.has_value());
  CHECK(v.evidence == "lcs 4");
}

TEST_CASE("ROUGE-L: issue case, CJK spaced text is one token per character") {
  const auto cand = tokenize("東京 は 日本 の 首都 です");
  const auto ref = tokenize("日本 の 首都 は 東京");
  REQUIRE(cand.size() == 10);
  REQUIRE(ref.size() == 8);
  const auto s = rougeL(cand, ref);
  CHECK(s.lcs == 5);  // 日本の首都
  CHECK(s.precision == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(s.recall == doctest::Approx(0.625).epsilon(1e-12));
  CHECK(s.f == doctest::Approx(5.0 / 9.0).epsilon(1e-12));  // 0.5556
  CHECK(s.f == doctest::Approx(0.5556).epsilon(1e-4));

  const auto v =
      RougeLJudge{}.judge(withReference("東京 は 日本 の 首都 です", "日本 の 首都 は 東京"));
  REQUIRE(v.score.has_value());
  CHECK(*v.score == doctest::Approx(5.0 / 9.0).epsilon(1e-12));
}

TEST_CASE("ROUGE-L: issue case, unspaced CJK against itself is 1") {
  const auto t = tokenize("会议改到周三");
  const auto s = rougeL(t, t);
  CHECK(s.lcs == 6);
  CHECK(s.precision == 1.0);
  CHECK(s.recall == 1.0);
  CHECK(s.f == 1.0);
  const auto v = RougeLJudge{}.judge(withReference("会议改到周三", "会议改到周三"));
  REQUIRE(v.score.has_value());
  CHECK(*v.score == 1.0);
  // Spaced and unspaced forms of the same text are the same tokens.
  const auto spaced = RougeLJudge{}.judge(withReference("会议 改到 周三", "会议改到周三"));
  REQUIRE(spaced.score.has_value());
  CHECK(*spaced.score == 1.0);
}

TEST_CASE("ROUGE-L: case and punctuation do not matter") {
  const auto v =
      RougeLJudge{}.judge(withReference("The Office opens at NINE!", "the office opens at nine"));
  REQUIRE(v.score.has_value());
  CHECK(*v.score == 1.0);
}

TEST_CASE("ROUGE-L: no common token scores 0") {
  const auto s = rougeL(tokenize("approved"), tokenize("denied"));
  CHECK(s.lcs == 0);
  CHECK(s.precision == 0.0);
  CHECK(s.recall == 0.0);
  CHECK(s.f == 0.0);
}

TEST_CASE("ROUGE-L: empty answer scores 0 without exception") {
  CHECK_NOTHROW(rougeL({}, tokenize("the office opens at nine")));
  const auto s = rougeL({}, tokenize("the office opens at nine"));
  CHECK(s.lcs == 0);
  CHECK(s.f == 0.0);
  const auto both_empty = rougeL(std::vector<std::string>{}, std::vector<std::string>{});
  CHECK(both_empty.f == 0.0);

  for (const char* answer : {"", "   ", "?!"}) {
    CAPTURE(answer);
    Verdict v;
    CHECK_NOTHROW(v = RougeLJudge{}.judge(withReference(answer, "the office opens at nine")));
    CHECK(v.outcome == Outcome::kOk);  // an empty answer is a real, bad answer
    REQUIRE(v.score.has_value());
    CHECK(*v.score == 0.0);
  }
}

TEST_CASE("ROUGE-L judge: no_reference when the reference is missing or empty") {
  for (const auto& ref : {std::optional<std::string>{}, std::optional<std::string>{""},
                          std::optional<std::string>{"  ... "}}) {
    CAPTURE(ref.value_or("<none>"));
    const auto v = RougeLJudge{}.judge(withReference("the office opens at nine", ref));
    CHECK(v.outcome == Outcome::kNoReference);
    CHECK_FALSE(v.score.has_value());
    CHECK(outcomeName(v.outcome) == "no_reference");
  }
}

TEST_CASE("ROUGE-L: a longer candidate with the whole reference keeps recall 1") {
  const auto s = rougeL(tokenize("yes the office opens at nine every day"),
                        tokenize("the office opens at nine"));
  CHECK(s.lcs == 5);
  CHECK(s.recall == 1.0);
  CHECK(s.precision == doctest::Approx(5.0 / 8.0).epsilon(1e-12));
  CHECK(s.f == doctest::Approx(2 * (5.0 / 8.0) / (5.0 / 8.0 + 1.0)).epsilon(1e-12));
}

TEST_CASE("rouge_l: time bounded whatever the size: too_long above kMaxLcsCells token pairs") {
  std::string words;
  for (int i = 0; i < 5000; ++i) words += "w" + std::to_string(i % 977) + " ";
  Event e;
  e.answer = words;
  e.reference = words;
  const auto j = RougeLJudge::create({});
  const Verdict v = j->judge(e);  // 5000 × 5000 = 25 M cells: 13 s at 50,000 tokens a side
  CHECK(v.outcome == Outcome::kTooLong);
  CHECK_FALSE(v.score.has_value());
  CHECK(v.evidence.find("5000 × 5000 tokens") == 0);
  std::string fewer;
  for (int i = 0; i < 3000; ++i) fewer += "w" + std::to_string(i % 977) + " ";
  e.answer = fewer;
  e.reference = fewer;  // 9 M cells: scored
  CHECK(j->judge(e).score == doctest::Approx(1.0));
}

TEST_CASE("bit-parallel LCS equals the textbook dynamic programme") {
  // Random token lists over small alphabets (many matches) and lengths around the 64-bit word
  // boundaries of the bit masks (63, 64, 65, 128, 129…).
  std::uint64_t state = 7;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  auto textbook = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::vector<std::size_t>> t(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j)
        t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
    return t[a.size()][b.size()];
  };
  const std::size_t lengths[] = {0, 1, 2, 31, 63, 64, 65, 127, 128, 129, 200};
  int cases = 0;
  for (const std::size_t la : lengths)
    for (const std::size_t lb : lengths)
      for (const std::uint64_t alphabet : {2, 5, 40}) {
        std::vector<std::string> a, b;
        for (std::size_t i = 0; i < la; ++i) a.push_back("w" + std::to_string(next() % alphabet));
        for (std::size_t i = 0; i < lb; ++i) b.push_back("w" + std::to_string(next() % alphabet));
        CAPTURE(la);
        CAPTURE(lb);
        CAPTURE(alphabet);
        const std::size_t expected = textbook(a, b);
        CHECK(lcsLength(a, b) == expected);
        CHECK(lcsLength(b, a) == expected);
        ++cases;
      }
  CHECK(cases == 363);
  // Long sides: 1,000 × 3,000 tokens, 16 words of bits.
  std::vector<std::string> a, b;
  for (int i = 0; i < 1000; ++i) a.push_back("w" + std::to_string(next() % 30));
  for (int i = 0; i < 3000; ++i) b.push_back("w" + std::to_string(next() % 30));
  CHECK(lcsLength(a, b) == textbook(a, b));
}

}  // namespace assay
