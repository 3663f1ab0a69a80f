#include "judges/tokenizer.hpp"

#include <doctest/doctest.h>
#include <xxhash.h>

#include <cstdint>
#include <string>
#include <vector>

#include "judges/token_ids.hpp"

namespace assay {
namespace {

using Tokens = std::vector<std::string>;

}  // namespace

TEST_CASE("tokenize lower-cases ASCII and non-ASCII letters") {
  CHECK(tokenize("Hello WORLD") == Tokens{"hello", "world"});
  CHECK(tokenize("École") == Tokens{"école"});
  CHECK(tokenize("ÉTÉ À PARIS") == Tokens{"été", "à", "paris"});
  CHECK(tokenize("Ωmega ΣΟΦΙΑ") == Tokens{"ωmega", "σοφια"});
}

TEST_CASE("tokenize strips punctuation and splits on it") {
  CHECK(tokenize("Hello, world! How are you?") == Tokens{"hello", "world", "how", "are", "you"});
  CHECK(tokenize("(see: section 4)") == Tokens{"see", "section", "4"});
  CHECK(tokenize("well-known e-mail") == Tokens{"well", "known", "e", "mail"});
  CHECK(tokenize("«Bonjour» — dit-il…") == Tokens{"bonjour", "dit", "il"});
  CHECK(tokenize("a,b") == Tokens{"a", "b"});  // comma between letters is not a number's
}

TEST_CASE("tokenize of empty, blank and punctuation-only text is empty") {
  CHECK(tokenize("").empty());
  CHECK(tokenize("   \t\n ").empty());
  CHECK(tokenize("?!... ,;").empty());
}

TEST_CASE("CJK is one token per character, spaced or unspaced") {
  const Tokens expected{"会", "议", "改", "到", "周", "三"};
  CHECK(tokenize("会议改到周三") == expected);
  CHECK(tokenize("会 议 改 到 周 三") == expected);
  CHECK(tokenize("東京 は 日本 の 首都 です").size() == 10);
  CHECK(tokenize("日本 の 首都 は 東京").size() == 8);
  // Katakana (with the prolonged sound mark) is split per character too.
  CHECK(tokenize("コーヒー") == Tokens{"コ", "ー", "ヒ", "ー"});
  // Digits and Latin letters next to Han characters stay words of their own.
  CHECK(tokenize("在2019年") == Tokens{"在", "2019", "年"});
  CHECK(tokenize("用iPhone拍") == Tokens{"用", "iphone", "拍"});

  const auto detailed = tokenizeDetailed("会议");
  REQUIRE(detailed.size() == 2);
  CHECK(detailed[0].cjk);
  CHECK(detailed[1].cjk);
  CHECK_FALSE(tokenizeDetailed("meeting")[0].cjk);
}

TEST_CASE("numbers keep decimal points and drop thousands separators") {
  CHECK(tokenize("1,250") == Tokens{"1250"});
  CHECK(tokenize("3.5") == Tokens{"3.5"});
  CHECK(tokenize("1,250.75 euros") == Tokens{"1250.75", "euros"});
  // A trailing period or comma ends the number and is a separator.
  CHECK(tokenize("It costs 30. Then 40, maybe") ==
        Tokens{"it", "costs", "30", "then", "40", "maybe"});
  CHECK(tokenize("1, 2") == Tokens{"1", "2"});
}

TEST_CASE("an apostrophe between letters is dropped") {
  CHECK(tokenize("don't") == Tokens{"dont"});
  CHECK(tokenize("It's") == Tokens{"its"});
  CHECK(tokenize("I\u2019m sure") == Tokens{"im", "sure"});  // typographic apostrophe
  // Quotes around a word are punctuation, not part of it.
  CHECK(tokenize("'quoted'") == Tokens{"quoted"});
  CHECK(tokenize("rock 'n' roll") == Tokens{"rock", "n", "roll"});
  // After a number the apostrophe separates.
  CHECK(tokenize("the 90's") == Tokens{"the", "90", "s"});
}

TEST_CASE("combining marks belong to the word") {
  // "e" + U+0301 COMBINING ACUTE ACCENT stays one token, in its decomposed form.
  CHECK(tokenize("cafe\u0301 ok") == Tokens{"cafe\u0301", "ok"});
}

TEST_CASE("invalid UTF-8 bytes separate words") {
  CHECK(tokenize("ab\xFF"
                 "cd") == Tokens{"ab", "cd"});
  CHECK(tokenize("\xC3").empty());
}

TEST_CASE("token flags: numeric, capitalized, sentence_start") {
  const auto t = tokenizeDetailed("The plan costs 45 euros in Paris. Then 5G\nnew line: Next");
  REQUIRE(t.size() == 12);
  CHECK(t[0].text == "the");
  CHECK(t[0].capitalized);
  CHECK(t[0].sentence_start);
  CHECK_FALSE(t[0].numeric);

  CHECK(t[1].text == "plan");
  CHECK_FALSE(t[1].capitalized);
  CHECK_FALSE(t[1].sentence_start);

  CHECK(t[3].text == "45");
  CHECK(t[3].numeric);
  CHECK_FALSE(t[3].capitalized);

  CHECK(t[6].text == "paris");
  CHECK(t[6].capitalized);
  CHECK_FALSE(t[6].sentence_start);  // a name, not a sentence start

  CHECK(t[7].text == "then");
  CHECK(t[7].sentence_start);  // after "."
  CHECK(t[7].capitalized);

  CHECK(t[8].text == "5g");
  CHECK(t[8].numeric);  // contains a digit

  CHECK(t[9].text == "new");
  CHECK(t[9].sentence_start);  // after a newline
  CHECK_FALSE(t[9].capitalized);

  CHECK(t[11].text == "next");
  CHECK(t[11].sentence_start);  // after ":"
  CHECK(t[11].capitalized);
}

TEST_CASE("sentence_start after ! and ? and a decimal point does not start a sentence") {
  const auto t = tokenizeDetailed("Yes! Why? It is 3.5 Percent");
  REQUIRE(t.size() == 6);
  CHECK(t[0].sentence_start);
  CHECK(t[1].sentence_start);
  CHECK(t[2].sentence_start);
  CHECK_FALSE(t[3].sentence_start);
  CHECK(t[4].text == "3.5");
  CHECK_FALSE(t[5].sentence_start);  // "3.5" kept its '.', so "Percent" is mid-sentence
  CHECK(t[5].capitalized);
}

TEST_CASE("tokenize equals the text of tokenizeDetailed") {
  const std::string text = "Le contrat, signé à Lyon en 2019, coûte 1.250,50 € — 会议";
  const auto detailed = tokenizeDetailed(text);
  const auto plain = tokenize(text);
  REQUIRE(plain.size() == detailed.size());
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(plain[i] == detailed[i].text);
}

TEST_CASE("isStopword: English and French function words, lower-cased input") {
  for (const char* w : {"the", "a", "of", "is", "and", "le", "les", "des", "du", "où", "à"}) {
    CAPTURE(w);
    CHECK(isStopword(w));
  }
  for (const char* w : {"warranty", "paris", "45", "garantie", "The", "LE", ""}) {
    CAPTURE(w);
    CHECK_FALSE(isStopword(w));
  }
}

TEST_CASE("isBlank: only Unicode white space") {
  CHECK(isBlank(""));
  CHECK(isBlank(" \t\r\n"));
  CHECK(isBlank("\u00A0"));         // NO-BREAK SPACE
  CHECK(isBlank("\u3000 \u2003"));  // IDEOGRAPHIC SPACE, EM SPACE
  CHECK(isBlank("\u200B\uFEFF"));   // zero-width space, BOM
  CHECK_FALSE(isBlank("a"));
  CHECK_FALSE(isBlank("  x  "));
  CHECK_FALSE(isBlank("\u00A0."));
  CHECK_FALSE(isBlank("会"));
  CHECK_FALSE(isBlank("\xFF"));  // an invalid byte is content, not white space
}

TEST_CASE("codepointCount counts code points, not bytes") {
  CHECK(codepointCount("") == 0);
  CHECK(codepointCount("abc") == 3);
  CHECK(codepointCount("café") == 4);
  CHECK(std::string("café").size() == 5);
  CHECK(codepointCount("会议改到周三") == 6);
  CHECK(codepointCount("😀!") == 2);
  CHECK(codepointCount("e\u0301") == 2);  // a combining mark is a code point of its own
}

TEST_CASE("French elisions split; English contractions join") {
  CHECK(tokenize("l'école") == Tokens{"l", "école"});
  CHECK(tokenize("Qu’il vienne jusqu'à demain") ==
        Tokens{"qu", "il", "vienne", "jusqu", "à", "demain"});
  CHECK(tokenize("c'est d'accord") == Tokens{"c", "est", "d", "accord"});
  CHECK(tokenize("don't can't") == Tokens{"dont", "cant"});
}

TEST_CASE("toLowerUtf8 lower-cases every script") {
  CHECK(toLowerUtf8("JE SUIS DÉSOLÉ") == "je suis désolé");
  CHECK(toLowerUtf8("ΑΘΗΝΑ Москва") == "αθηνα москва");
}

TEST_CASE("tokenizeInto gives tokenize's tokens and tokenizeDetailed's flags on hostile text") {
  // Random texts built from the pieces the rules treat specially: citation markers (and
  // brackets that are none), apostrophes, decimal points, thousands commas, CJK, invalid bytes.
  const char* pieces[] = {"a",   "B",    "é",      "É",       "1",         ",",       ".", "'",
                          "’",   "[1]",  "[2, 3]", "[doc-7]", "[EMAIL_1]", "[",       "]", " ",
                          "\n",  "会",   "l'",     "\xff",    "qu'",       "3.5",     "x", "?",
                          "Don", "\xe4", "ー",     "[[1]",    "1,250",     "e\u0301", "A."};
  std::uint64_t state = 42;
  auto next = [&] {  // splitmix64: deterministic across runs
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  Words w;
  std::size_t tokens = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const auto n = next() % 24;
    for (std::uint64_t k = 0; k < n; ++k) text += pieces[next() % std::size(pieces)];
    CAPTURE(text);
    for (const bool skip : {false, true}) {
      w.clear();
      tokenizeInto(text, w, skip);
      const std::string stripped = skip ? stripCitationMarkers(text) : text;
      const auto expected = tokenizeDetailed(stripped);
      REQUIRE(w.size() == expected.size());
      for (std::size_t i = 0; i < w.size(); ++i) {
        CHECK(w[i] == expected[i].text);
        CHECK(w.hashes[i] == XXH3_64bits(expected[i].text.data(), expected[i].text.size()));
        CHECK(((w.flags[i] & Words::kNumeric) != 0) == expected[i].numeric);
        CHECK(((w.flags[i] & Words::kCapitalized) != 0) == expected[i].capitalized);
        CHECK(((w.flags[i] & Words::kSentenceStart) != 0) == expected[i].sentence_start);
        CHECK(((w.flags[i] & Words::kCjk) != 0) == expected[i].cjk);
        // Spans are in the source text: the token's first code point starts there.
        if (!skip) CHECK(w.spans[i].first == expected[i].begin);
        CHECK(w.spans[i].second <= text.size());
      }
      tokens += w.size();
    }
  }
  CHECK(tokens > 100000);  // the texts did hold words
}

TEST_CASE("tokenizeInto skips citation markers with the source's offsets") {
  Words w;
  tokenizeInto("Paris [1]. Lyon[2, 3] [EMAIL_1]", w, true);
  REQUIRE(w.size() == 4);
  CHECK(w[0] == "paris");
  CHECK(w[1] == "lyon");
  CHECK(w[2] == "email");
  CHECK(w[3] == "1");
  CHECK(w.spans[1] == std::pair<std::uint32_t, std::uint32_t>{11, 15});
  CHECK((w.flags[1] & Words::kSentenceStart) != 0);  // after "[1]." : the period still counts
}

TEST_CASE("TokenIds tells apart tokens whose hashes are equal") {
  TokenIds ids;
  ids.reset(1);
  CHECK(ids.intern(7, "alpha") == 0);
  CHECK(ids.intern(7, "beta") == 1);  // same hash, other bytes: another id
  CHECK(ids.intern(7, "alpha") == 0);
  CHECK(ids.find(7, "beta") == 1);
  CHECK(ids.find(7, "gamma") == TokenIds::kAbsent);
  CHECK(ids.find(8, "alpha") == TokenIds::kAbsent);
  // Growing past the initial 64 slots keeps every id.
  std::vector<std::string> many;
  for (int i = 0; i < 1000; ++i) many.push_back("t" + std::to_string(i));
  for (const auto& t : many) ids.intern(XXH3_64bits(t.data(), t.size()), t);
  CHECK(ids.size() == 1002);
  for (int i = 0; i < 1000; ++i)
    CHECK(ids.find(XXH3_64bits(many[i].data(), many[i].size()), many[i]) ==
          static_cast<std::uint32_t>(i + 2));
  ids.reset(3);
  CHECK(ids.size() == 0);
  CHECK(ids.find(7, "alpha") == TokenIds::kAbsent);
}

TEST_CASE("isStopword by hash agrees with the plain lookup") {
  for (std::string_view w : {"the", "of", "été", "dont", "paris", "theory", "", "a"}) {
    CAPTURE(w);
    CHECK(isStopword(XXH3_64bits(w.data(), w.size()), w) == isStopword(w));
  }
  CHECK(isStopword("the"));
  CHECK(isStopword("été"));
  CHECK_FALSE(isStopword("paris"));
}

TEST_CASE("cachedWords tokenizes a text once and never serves another text's tokens") {
  std::string text = "Paris [1] is big";
  const Words* first = &cachedWords(text, true, 0);
  REQUIRE(first->size() == 3);
  CHECK((*first)[0] == "paris");
  const Words& again = cachedWords(text, true, 0);
  CHECK(&again == first);
  CHECK(again.size() == 3);
  CHECK(cachedWords(text, false, 0).size() == 4);  // markers kept: "1" is a token
  text[0] = 'L';                                   // same buffer, same size, other bytes
  text[1] = 'y';
  text[2] = 'o';
  text[3] = 'n';
  text[4] = 's';
  const Words& changed = cachedWords(text, true, 0);
  REQUIRE(changed.size() == 3);
  CHECK(changed[0] == "lyons");
  CHECK(cachedWords("other", true, 1)[0] == "other");
  CHECK(cachedWords(text, true, 0)[0] == "lyons");  // slot 1's text left slot 0 alone
}

}  // namespace assay
