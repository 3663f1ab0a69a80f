#include "judges/tokenizer.hpp"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/utf8.h>

#include "judges/token_ids.hpp"

#define XXH_INLINE_ALL  // the same XXH3 as libxxhash, inlined: a hash per token
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <climits>

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

// ASCII classes for the tokenizer's fast path: 0 = not a word character.
constexpr std::uint8_t kLower = 1, kUpper = 2, kDigitClass = 4;
constexpr std::array<std::uint8_t, 128> kAscii = [] {
  std::array<std::uint8_t, 128> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = kLower;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = kUpper;
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = kDigitClass;
  return t;
}();

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

void Words::clear() {
  chars.clear();
  ends.clear();
  hashes.clear();
  flags.clear();
  spans.clear();
}

void Words::push(std::string_view token) { push(token, XXH3_64bits(token.data(), token.size())); }

void Words::push(std::string_view token, std::uint64_t hash) {
  chars.append(token);
  ends.push_back(static_cast<std::uint32_t>(chars.size()));
  hashes.push_back(hash);
  flags.push_back(0);
  spans.emplace_back(0, 0);
}

void Words::shrinkIfAbove(std::size_t max_bytes) {
  if (chars.capacity() + ends.capacity() * 23 <= max_bytes) return;  // 4+8+1+8 (+2) per token
  *this = Words{};
}

Words& scratchWords(int slot) {
  thread_local std::array<Words, 4> words;
  Words& w = words.at(static_cast<std::size_t>(slot));
  w.shrinkIfAbove(std::size_t{1} << 20);
  w.clear();
  return w;
}

const Words& cachedWords(std::string_view text, bool skip_citation_markers, int slot) {
  struct Entry {
    std::string text;
    bool skip = false;
    bool valid = false;
    Words words;
  };
  thread_local std::array<Entry, 2> cache;
  Entry& e = cache.at(static_cast<std::size_t>(slot));
  if (e.valid && e.skip == skip_citation_markers && e.text == text) return e.words;
  e.words.shrinkIfAbove(std::size_t{1} << 20);
  e.words.clear();
  tokenizeInto(text, e.words, skip_citation_markers);
  if (e.text.capacity() > (std::size_t{1} << 20)) std::string().swap(e.text);
  e.text.assign(text);
  e.skip = skip_citation_markers;
  e.valid = true;
  return e.words;
}

namespace {

// tokenizeInto's state over one text: the word being built and whether the next word starts a
// sentence. Offsets are int32_t as ICU's U8_NEXT wants them.
class WordScanner {
 public:
  WordScanner(std::string_view text, Words& out)
      : text_(text),
        s_(reinterpret_cast<const uint8_t*>(text.data())),
        len_(static_cast<int32_t>(std::min<std::size_t>(text.size(), INT32_MAX))),
        out_(out) {}

  int32_t size() const { return len_; }

  // A run of ASCII letters and digits from `at`: appended lower-cased; returns its end.
  int32_t asciiRun(int32_t at) {
    const std::uint8_t first = kAscii[s_[at]];
    if (!in_word_) start(at, (first & kUpper) != 0);
    std::uint8_t seen = first;
    int32_t i = at + 1;
    while (i < len_ && s_[i] < 0x80 && kAscii[s_[i]] != 0) seen |= kAscii[s_[i++]];
    if (seen & kDigitClass) flags_ |= Words::kNumeric;
    const std::size_t from = out_.chars.size();
    out_.chars.append(text_.data() + at, static_cast<std::size_t>(i - at));
    if (seen & kUpper)
      for (std::size_t k = from; k < out_.chars.size(); ++k)
        if (kAscii[static_cast<unsigned char>(out_.chars[k])] & kUpper) out_.chars[k] += 'a' - 'A';
    word_end_ = i;
    return i;
  }

  // A Han/Kana character [at, end): a token of its own.
  void cjk(UChar32 c, int32_t at, int32_t end) {
    flush();
    const std::size_t from = out_.chars.size();
    append(out_.chars, u_tolower(c));
    emit(from, Words::kCjk | (next_starts_sentence_ ? Words::kSentenceStart : 0), at, end);
    next_starts_sentence_ = false;
  }

  // A non-ASCII word character [at, end).
  void wideWordChar(UChar32 c, int32_t at, int32_t end) {
    if (!in_word_) start(at, u_isupper(c) || u_istitle(c));
    if (isDigit(c)) flags_ |= Words::kNumeric;
    append(out_.chars, toLower(c));
    word_end_ = end;
  }

  // Any other code point, ending at `next_at`: an apostrophe or a number's point or comma may
  // stay inside the word; everything else ends it (and . ! ? : newline 。！？ a sentence).
  void separator(UChar32 c, int32_t next_at) {
    if (in_word_) {
      const UChar32 next = peek(next_at);
      const std::string_view word(out_.chars.data() + word_chars_, out_.chars.size() - word_chars_);
      const bool numeric = (flags_ & Words::kNumeric) != 0;
      if (isApostrophe(c) && next >= 0 && u_isalpha(next) && !word.empty() && !numeric) {
        if (isFrenchElision(word)) flush();  // "l'école" → "l" "école"
        return;                              // "don't" → "dont"
      }
      if ((c == '.' || c == ',') && numeric && next >= 0 && u_isdigit(next) &&
          u_isdigit(static_cast<UChar32>(static_cast<unsigned char>(word.back())))) {
        if (c == '.') out_.chars.push_back('.');  // decimal point kept, thousands comma dropped
        return;
      }
    }
    flush();
    if (c == '.' || c == '!' || c == '?' || c == ':' || c == '\n' || c == 0x3002 /* 。 */ ||
        c == 0xFF01 || c == 0xFF1F) {
      next_starts_sentence_ = true;
    }
  }

  void flush() {
    if (in_word_ && out_.chars.size() > word_chars_)
      emit(word_chars_, flags_, word_begin_, word_end_);
    in_word_ = false;
  }

 private:
  void start(int32_t at, bool capitalized) {
    in_word_ = true;
    flags_ = next_starts_sentence_ ? Words::kSentenceStart : 0;
    if (capitalized) flags_ |= Words::kCapitalized;
    next_starts_sentence_ = false;
    word_chars_ = out_.chars.size();
    word_begin_ = at;
  }

  void emit(std::size_t from, std::uint8_t f, int32_t b, int32_t e) {
    out_.ends.push_back(static_cast<std::uint32_t>(out_.chars.size()));
    out_.hashes.push_back(XXH3_64bits(out_.chars.data() + from, out_.chars.size() - from));
    out_.flags.push_back(f);
    out_.spans.emplace_back(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e));
  }

  UChar32 peek(int32_t at) const {
    if (at >= len_) return -1;
    UChar32 c;
    U8_NEXT(s_, at, len_, c);
    return c;
  }

  std::string_view text_;
  const uint8_t* s_;
  int32_t len_;
  Words& out_;
  bool in_word_ = false;
  bool next_starts_sentence_ = true;
  std::uint8_t flags_ = 0;
  std::size_t word_chars_ = 0;  // offset in out_.chars where the current word starts
  int32_t word_begin_ = 0;      // byte offset of the current word's first code point
  int32_t word_end_ = 0;        // byte offset past the current word's last code point
};

}  // namespace

void tokenizeInto(std::string_view text, Words& out, bool skip_citation_markers) {
  WordScanner scan(text, out);
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t len = scan.size();
  int32_t i = 0;
  while (i < len) {
    const int32_t at = i;
    UChar32 c = s[i];
    if (c < 0x80) {
      if (kAscii[c] != 0) {  // the common case: a run of ASCII letters and digits
        i = scan.asciiRun(at);
        continue;
      }
      ++i;
      if (c == ' ') {  // the commonest separator: ends a word, starts no sentence
        scan.flush();
        continue;
      }
      if (c == '[' && skip_citation_markers) {
        if (const std::size_t n = citationMarkerLength(text, static_cast<std::size_t>(at))) {
          scan.flush();  // a marker separates, as the space stripCitationMarkers puts there
          i = at + static_cast<int32_t>(n);
          continue;
        }
      }
    } else {
      U8_NEXT(s, i, len, c);  // advances i past the code point
      if (c < 0) {            // invalid sequence: a separator
        scan.flush();
        continue;
      }
      if (isCjk(c)) {
        scan.cjk(c, at, i);
        continue;
      }
      if (isWordChar(c)) {
        scan.wideWordChar(c, at, i);
        continue;
      }
    }
    scan.separator(c, i);
  }
  scan.flush();
}

std::vector<Token> tokenizeDetailed(std::string_view text) {
  Words& w = scratchWords(3);
  tokenizeInto(text, w);
  std::vector<Token> out(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    Token& t = out[i];
    t.text = w[i];
    t.numeric = (w.flags[i] & Words::kNumeric) != 0;
    t.capitalized = (w.flags[i] & Words::kCapitalized) != 0;
    t.sentence_start = (w.flags[i] & Words::kSentenceStart) != 0;
    t.cjk = (w.flags[i] & Words::kCjk) != 0;
    t.begin = w.spans[i].first;
    t.end = w.spans[i].second;
  }
  return out;
}

std::vector<std::string> tokenize(std::string_view text) {
  Words& w = scratchWords(3);
  tokenizeInto(text, w);
  std::vector<std::string> out;
  out.reserve(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) out.emplace_back(w[i]);
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
  // Looked for within the 24 bytes a marker may span, never to the end of the text: a text of
  // 900 KB of '[' cost 15 s across three judges when every '[' searched to the end.
  const std::size_t window = text.substr(at + 1, 24).find(']');
  if (window == std::string_view::npos || window == 0) return 0;
  const std::size_t close = at + 1 + window;
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

namespace {

const TokenIds& stopwords() {
  static const TokenIds table = [] {
    static constexpr std::string_view kStopwords[] = {
        // English (function words; derived from common IR stop lists)
        "a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "to", "in", "on", "at",
        "by", "for", "with", "about", "as", "into", "through", "over", "from", "up", "down", "out",
        "off", "than", "so", "too", "very", "is", "are", "was", "were", "be", "been", "being", "am",
        "do", "does", "did", "doing", "have", "has", "had", "having", "will", "would", "shall",
        "should", "can", "could", "may", "might", "must", "it", "its", "itself", "this", "that",
        "these", "those", "there", "here", "i", "me", "my", "we", "our", "us", "you", "your", "he",
        "him", "his", "she", "her", "they", "them", "their", "what", "which", "who", "whom",
        "whose", "when", "where", "why", "how", "all", "any", "both", "each", "few", "more", "most",
        "other", "some", "such", "no", "nor", "not", "only", "own", "same", "just", "also", "s",
        "t", "dont", "im", "its", "thats", "yes", "well", "oh", "like", "really", "know", "think",
        "one", "get", "got", "lot", "much", "many", "because", "while", "during", "before", "after",
        "above", "below", "between", "again", "further", "once", "let", "lets", "yeah", "okay",
        "ok", "sure", "etc",
        // French
        "le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "et", "ou", "mais", "donc",
        "car", "ni", "que", "qu", "qui", "quoi", "dont", "où", "à", "au", "aux", "en", "dans",
        "par", "pour", "sur", "sous", "avec", "sans", "chez", "ce", "cet", "cette", "ces", "se",
        "sa", "son", "ses", "leur", "leurs", "il", "elle", "ils", "elles", "on", "nous", "vous",
        "je", "j", "tu", "me", "m", "te", "lui", "y", "est", "sont", "était", "été", "être", "a",
        "ont", "avait", "avoir", "pas", "ne", "n", "plus", "très", "aussi", "comme", "si", "c", "s",
        "ça", "cela", "ceci"};
    TokenIds t;
    t.reset(std::size(kStopwords));
    for (auto w : kStopwords) t.intern(XXH3_64bits(w.data(), w.size()), w);
    return t;
  }();
  return table;
}

}  // namespace

bool isStopword(std::uint64_t hash, std::string_view w) {
  return stopwords().find(hash, w) != TokenIds::kAbsent;
}

bool isStopword(std::string_view w) { return isStopword(XXH3_64bits(w.data(), w.size()), w); }

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
