#include "judges/tokenizer.hpp"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utf8.h>

#include <array>
#include <unordered_set>

namespace assay {
namespace {

bool isCjk(UChar32 c) {
  if (c < 0x2E80) return false;  // below the CJK radicals: no Han, Kana or Bopomofo
  UErrorCode err = U_ZERO_ERROR;
  UScriptCode s = uscript_getScript(c, &err);
  if (U_FAILURE(err)) return false;
  return s == USCRIPT_HAN || s == USCRIPT_HIRAGANA || s == USCRIPT_KATAKANA ||
         s == USCRIPT_BOPOMOFO || c == 0x30FC /* prolonged sound mark, script Common */;
}

bool isAsciiLetter(UChar32 c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isAsciiDigit(UChar32 c) { return c >= '0' && c <= '9'; }

bool isWordChar(UChar32 c) {
  if (c < 0x80) return isAsciiLetter(c) || isAsciiDigit(c);  // the common case, without ICU
  if (u_isalnum(c)) return true;
  const int8_t t = u_charType(c);
  return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK;
}

bool isApostrophe(UChar32 c) { return c == '\'' || c == 0x2019; }

// French elided articles, pronouns and conjunctions: l'école, d'un, qu'il, jusqu'à.
bool isFrenchElision(std::string_view w) {
  static constexpr std::string_view kElisions[] = {
      "l", "d", "j", "m", "n", "s", "t", "c", "qu", "jusqu", "lorsqu", "puisqu", "quoiqu"};
  for (auto e : kElisions)
    if (w == e) return true;
  return false;
}

UChar32 toLower(UChar32 c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
  return u_tolower(c);
}

bool isDigit(UChar32 c) { return c < 0x80 ? isAsciiDigit(c) : u_isdigit(c) != 0; }

void append(std::string& out, UChar32 c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
    return;
  }
  char buf[U8_MAX_LENGTH];
  int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c);
  out.append(buf, static_cast<size_t>(n));
}

}  // namespace

std::vector<Token> tokenizeDetailed(std::string_view text) {
  std::vector<Token> out;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto len = static_cast<int32_t>(text.size());
  Token cur;
  bool in_word = false;
  bool next_starts_sentence = true;
  int32_t word_end = 0;  // byte offset past the current word's last code point
  auto flush = [&] {
    cur.end = static_cast<std::size_t>(word_end);
    if (in_word && !cur.text.empty()) out.push_back(std::move(cur));
    cur = Token{};
    in_word = false;
  };
  auto peek = [&](int32_t at) -> UChar32 {
    if (at >= len) return -1;
    UChar32 c;
    U8_NEXT(s, at, len, c);
    return c;
  };
  int32_t i = 0;
  while (i < len) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, len, c);  // advances i past the code point
    if (c < 0) {            // invalid sequence: a separator
      flush();
      continue;
    }
    if (isCjk(c)) {
      flush();
      Token t;
      append(t.text, u_tolower(c));
      t.cjk = true;
      t.begin = static_cast<std::size_t>(at);
      t.end = static_cast<std::size_t>(i);
      t.sentence_start = next_starts_sentence;
      next_starts_sentence = false;
      out.push_back(std::move(t));
      continue;
    }
    if (isWordChar(c)) {
      if (!in_word) {
        in_word = true;
        cur.sentence_start = next_starts_sentence;
        next_starts_sentence = false;
        cur.capitalized = c < 0x80 ? (c >= 'A' && c <= 'Z') : (u_isupper(c) || u_istitle(c));
        cur.begin = static_cast<std::size_t>(at);
      }
      if (isDigit(c)) cur.numeric = true;
      append(cur.text, toLower(c));
      word_end = i;
      continue;
    }
    // Separators that may stay inside a word or a number.
    if (in_word) {
      const UChar32 next = peek(i);
      if (isApostrophe(c) && next >= 0 && u_isalpha(next) && !cur.text.empty() && !cur.numeric) {
        if (isFrenchElision(cur.text)) {  // "l'école" → "l" "école"
          flush();
          continue;
        }
        continue;  // "don't" → "dont"
      }
      if ((c == '.' || c == ',') && cur.numeric && next >= 0 && u_isdigit(next) &&
          u_isdigit(static_cast<UChar32>(static_cast<unsigned char>(cur.text.back())))) {
        if (c == '.') cur.text.push_back('.');  // decimal point kept, thousands comma dropped
        continue;
      }
    }
    flush();
    if (c == '.' || c == '!' || c == '?' || c == ':' || c == '\n' || c == 0x3002 /* 。 */ ||
        c == 0xFF01 || c == 0xFF1F) {
      next_starts_sentence = true;
    }
  }
  flush();
  return out;
}

std::vector<std::string> tokenize(std::string_view text) {
  std::vector<std::string> out;
  for (auto& t : tokenizeDetailed(text)) out.push_back(std::move(t.text));
  return out;
}

std::string toLowerUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto len = static_cast<int32_t>(text.size());
  int32_t i = 0;
  while (i < len) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, len, c);
    if (c < 0) {
      out.append(text.substr(static_cast<size_t>(start), static_cast<size_t>(i - start)));
      continue;
    }
    append(out, u_tolower(c));
  }
  return out;
}

std::size_t citationMarkerLength(std::string_view text, std::size_t at) {
  if (at >= text.size() || text[at] != '[') return 0;
  const std::size_t close = text.find(']', at + 1);
  if (close == std::string_view::npos || close - at > 24 || close == at + 1) return 0;
  const std::string_view inside = text.substr(at + 1, close - at - 1);
  const bool marker = inside.find_first_not_of(
                          "0123456789, ;-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") ==
                          std::string_view::npos &&
                      inside.find_first_of("0123456789") != std::string_view::npos;
  if (!marker) return 0;
  // A redaction placeholder ("[EMAIL_1]", "[EMPLOYEE_ID_2]": upper case, '_', a number) is a
  // value of the text, not a citation (judges/redaction.hpp).
  const std::size_t us = inside.rfind('_');
  if (us != std::string_view::npos && us > 0 && us + 1 < inside.size() &&
      inside.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string_view::npos &&
      inside.find_first_not_of("0123456789", us + 1) == std::string_view::npos &&
      inside.front() >= 'A' && inside.front() <= 'Z')
    return 0;
  return close - at + 1;
}

std::string stripCitationMarkers(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (const std::size_t n = citationMarkerLength(text, i); n > 0) {
      out.push_back(' ');
      i += n - 1;
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

namespace {

bool isAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Closing quotes and brackets that may follow a sentence's final punctuation: " ' ) ] ” ’ » 」 』.
std::size_t closingLength(std::string_view text, std::size_t at) {
  if (at >= text.size()) return 0;
  const char c = text[at];
  if (c == '"' || c == '\'' || c == ')') return 1;
  for (std::string_view q : {"\u201D", "\u2019", "\u00BB", "\u300D", "\u300F"})
    if (text.substr(at, q.size()) == q) return q.size();
  return 0;
}

// "e.g." "i.e." "U.S." "Dr." …: a period after one of these (or after a single letter, an
// initial as in "George R. R. Martin") ends no sentence.
bool abbreviationBefore(std::string_view text, std::size_t period, std::size_t from) {
  std::size_t k = period;
  while (k > from) {
    const char c = text[k - 1];
    const bool ascii_alnum =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ascii_alnum && c != '.') break;
    --k;
  }
  std::string word;
  for (std::size_t j = k; j < period; ++j)
    word.push_back(static_cast<char>(text[j] >= 'A' && text[j] <= 'Z' ? text[j] + 32 : text[j]));
  // An initial is one capital letter ("R. R. Martin"); a lower-case letter ("18 h.") is a word.
  if (word.size() == 1 && text[period - 1] >= 'A' && text[period - 1] <= 'Z') return true;
  static constexpr std::string_view kAbbreviations[] = {
      "e.g", "i.e", "etc", "vs",  "dr",  "mr", "mrs", "ms",  "st", "no", "fig", "al", "approx",
      "cf",  "jr",  "sr",  "inc", "ltd", "co", "u.s", "u.k", "p",  "pp", "vol", "ed"};
  for (auto a : kAbbreviations)
    if (word == a) return true;
  return false;
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> sentenceSpans(std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto len = static_cast<int32_t>(text.size());
  std::size_t begin = 0;
  auto push = [&](std::size_t end) {
    for (std::size_t j = begin; j < end; ++j)
      if (!isAsciiSpace(text[j])) {
        spans.emplace_back(begin, end);
        break;
      }
    begin = end;
  };
  int32_t i = 0;
  while (i < len) {
    const auto at = static_cast<std::size_t>(i);
    UChar32 c;
    U8_NEXT(s, i, len, c);
    std::size_t j = static_cast<std::size_t>(i);
    if (c == 0x3002 || c == 0xFF01 || c == 0xFF1F) {  // 。！？ end a sentence, spaced or not
      while (const std::size_t n = closingLength(text, j)) j += n;
      push(j);
      i = static_cast<int32_t>(j);
      continue;
    }
    if (c != '.' && c != '!' && c != '?') continue;
    for (;;) {  // closing quotes and citation markers stay with the sentence they end
      if (const std::size_t n = closingLength(text, j)) {
        j += n;
      } else if (const std::size_t m = citationMarkerLength(text, j)) {
        j += m;
      } else {
        break;
      }
    }
    if (j < text.size() && !isAsciiSpace(text[j])) continue;  // "3.5", "example.com", "?!"
    if (c == '.' && abbreviationBefore(text, at, begin)) continue;
    auto next = static_cast<int32_t>(j);
    while (next < len && isAsciiSpace(text[static_cast<std::size_t>(next)])) ++next;
    if (next < len) {
      UChar32 n;
      int32_t k = next;
      U8_NEXT(s, k, len, n);
      if (n >= 0 && u_islower(n)) continue;  // "… approx. five", lower case goes on
    }
    push(j);
    i = static_cast<int32_t>(j);
  }
  push(text.size());
  return spans;
}

std::size_t codepointCount(std::string_view text) {
  std::size_t n = 0;
  for (unsigned char ch : text) n += (ch & 0xC0) != 0x80;
  return n;
}

bool isStopword(std::string_view w) {
  static const std::unordered_set<std::string_view> kStopwords = {
      // English (function words; derived from common IR stop lists)
      "a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "to", "in", "on", "at",
      "by", "for", "with", "about", "as", "into", "through", "over", "from", "up", "down", "out",
      "off", "than", "so", "too", "very", "is", "are", "was", "were", "be", "been", "being", "am",
      "do", "does", "did", "doing", "have", "has", "had", "having", "will", "would", "shall",
      "should", "can", "could", "may", "might", "must", "it", "its", "itself", "this", "that",
      "these", "those", "there", "here", "i", "me", "my", "we", "our", "us", "you", "your", "he",
      "him", "his", "she", "her", "they", "them", "their", "what", "which", "who", "whom", "whose",
      "when", "where", "why", "how", "all", "any", "both", "each", "few", "more", "most", "other",
      "some", "such", "no", "nor", "not", "only", "own", "same", "just", "also", "s", "t", "dont",
      "im", "its", "thats", "yes", "well", "oh", "like", "really", "know", "think", "one", "get",
      "got", "lot", "much", "many", "because", "while", "during", "before", "after", "above",
      "below", "between", "again", "further", "once", "let", "lets", "yeah", "okay", "ok", "sure",
      "etc",
      // French
      "le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "et", "ou", "mais", "donc",
      "car", "ni", "que", "qu", "qui", "quoi", "dont", "où", "à", "au", "aux", "en", "dans", "par",
      "pour", "sur", "sous", "avec", "sans", "chez", "ce", "cet", "cette", "ces", "se", "sa", "son",
      "ses", "leur", "leurs", "il", "elle", "ils", "elles", "on", "nous", "vous", "je", "j", "tu",
      "me", "m", "te", "lui", "y", "est", "sont", "était", "été", "être", "a", "ont", "avait",
      "avoir", "pas", "ne", "n", "plus", "très", "aussi", "comme", "si", "c", "s", "ça", "cela",
      "ceci"};
  return kStopwords.count(w) > 0;
}

}  // namespace assay

namespace assay {
bool isBlank(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const auto len = static_cast<int32_t>(text.size());
  int32_t i = 0;
  while (i < len) {
    UChar32 c;
    U8_NEXT(s, i, len, c);
    if (c < 0 || !(u_isUWhiteSpace(c) || c == 0x200B || c == 0xFEFF)) return false;
  }
  return true;
}
}  // namespace assay
