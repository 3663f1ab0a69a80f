#include "judges/tokenizer.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

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

}  // namespace assay
