#include "judges/abstention.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "judges/tokenizer.hpp"

namespace assay {
namespace {

// On the normalised sentence (lower case, ' for ’ ‘, contractions joined, single spaces).
constexpr const char* kAbstention =
    R"((?:)"
    // first-person uncertainty and refusals
    R"(\bi(?:'m| am|m| m) (?:really |just |honestly )?not (?:sure|certain)\b)"
    R"(|^(?:not sure|no idea)\b)"
    // "I have no idea." abstains; "I had no idea he died" tells something
    R"(|\bi (?:have|'ve) no idea(?:$|[,.!?;:]| but| about| what| how| who| where| when| why| )"
    R"(whether| if| which))"
    R"(|\bi (?:do not|don't|dont|really don't|honestly don't) know\b)"
    R"(|\bi (?:cannot|can't|cant|am unable to|'m unable to|am not able to|'m not able to) )"
    R"((?:answer|say|tell|determine|find|help|provide|confirm)\b)"
    // the contexts do not cover it
    R"(|\b(?:context|contexts|document|documents|passage|passages|source|sources|text|texts|)"
    R"(excerpt|excerpts|information|data|search results?|snippets?|articles?) )"
    R"((?:provided |given |above |available |retrieved |supplied )?(?:do|does|did)(?: not|n't) )"
    R"((?:directly |explicitly |specifically |clearly |actually )?(?:mention|say|state|specify|)"
    R"(provide|contain|include|cover|discuss|address|give|describe|indicate|offer|list|)"
    R"(answer|tell|explain|detail|reference)\b)"
    R"(|\bnot (?:directly |explicitly |specifically |clearly )?(?:stated|mentioned|specified|)"
    R"(provided|given|covered|discussed|addressed|described|found|available|included|listed) )"
    R"((?:in|within|by|from) (?:the|these|those|any of the|any) (?:provided |given |available )"
    R"(|retrieved |above |supplied )?(?:context|contexts|documents?|passages?|sources?|text|)"
    R"(texts|information|excerpts?|search results?|snippets?|articles?)\b)"
    R"(|\b(?:there is|there's|there are|i have|i've|with|contains?|provides?|gives?|offers?) )"
    R"(no (?:direct |specific |relevant |explicit |clear |further |detailed )?)"
    R"((?:information|mention|details?|data)\b)"
    R"(|\b(?:not enough|insufficient) (?:information|context|data|details)\b)"
    R"(|\b(?:additional|more|further) (?:information|details|data|context) )"
    R"((?:is|are|would be|will be) (?:required|needed|necessary)\b)"
    R"(|\bcannot be (?:determined|answered|inferred|known)\b)"
    R"(|\b(?:unable|impossible) to (?:answer|determine|say|tell)\b)"
    // French (no \b after an accented letter: RE2's \b is ASCII's)
    R"(|\bje ne (?:le )?sais pas\b|\bje ne suis pas (?:sûr|sûre|certain|certaine))"
    R"(|\bje n'en sais rien\b|\bimpossible de répondre|\bje ne peux pas répondre)"
    R"(|\baucune (?:information|mention|donnée|précision))"
    R"(|\bpas (?:assez|suffisamment) d'(?:information|informations|éléments))"
    R"(|\b(?:le contexte|les contextes|les documents|le document|le texte|les sources|)"
    R"(les passages|la source) ne (?:le |les )?(?:mentionne|mentionnent|précise|précisent|dit|)"
    R"(disent|contient|contiennent|fournit|fournissent|donne|donnent|indique|indiquent|)"
    R"(permet|permettent|traite|traitent|aborde|abordent)\b)"
    R"(|\bn'est pas (?:mentionnée?|précisée?|indiquée?|fournie?|spécifiée?|abordée?))"
    R"())";

// The connector as a group: find() reads the whole match, FindAndConsume() the group.
constexpr const char* kConnector = R"((\b(?:but|however|mais|cependant)\b|\bi (?:do )?know\b))";
// A clause boundary after the abstention: the rest is asserted when it has 3 words or more.
constexpr const char* kBoundary = R"([,;:.!?](?: |$))";
// "While the text does not say X, it implies Y": the concession ends at its comma.
constexpr const char* kConcession = R"(^(?:while|although|though|even though|bien que|même si)\b)";

/// The patterns, compiled once.
struct Patterns {
  re2::RE2 abstention{kAbstention}, connector{kConnector}, boundary{kBoundary},
      concession{kConcession};
};

const Patterns& patterns() {
  static const Patterns p;
  return p;
}

/// The sentence normalised for matching, and for each of its bytes the offset of the byte of
/// `s` it comes from.
struct Normalised {
  std::string text;
  std::vector<std::size_t> from;
};

Normalised normalise(std::string_view s) {
  Normalised n;
  n.text.reserve(s.size());
  n.from.reserve(s.size());
  const auto put = [&](char c, std::size_t at) {
    n.text.push_back(c);
    n.from.push_back(at);
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    // ’ ‘ (U+2019, U+2018: E2 80 99 / 98) read as '
    if (u == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0x99 ||
         static_cast<unsigned char>(s[i + 2]) == 0x98)) {
      put('\'', i);
      i += 2;
      continue;
    }
    char c = s[i];
    if (u < 0x80) c = static_cast<char>(std::tolower(u));
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    if (c == ' ' && (n.text.empty() || n.text.back() == ' ')) continue;
    if (c == '\'' && !n.text.empty() && n.text.back() == ' ') {
      n.text.pop_back();  // "i ' m" → "i'm", "do n't" handled below
      n.from.pop_back();
    }
    if (c == ' ' && !n.text.empty() && n.text.back() == '\'') continue;
    put(c, i);
  }
  // "do n't" → "don't": a space before n't
  std::string joined;
  std::vector<std::size_t> from;
  joined.reserve(n.text.size());
  from.reserve(n.text.size());
  for (std::size_t i = 0; i < n.text.size(); ++i) {
    if (n.text[i] == ' ' && n.text.compare(i + 1, 4, "n't") == 0 && i > 0 && n.text[i - 1] != ' ')
      continue;
    joined.push_back(n.text[i]);
    from.push_back(n.from[i]);
  }
  n.text = std::move(joined);
  n.from = std::move(from);
  return n;
}

bool wordByte(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80;
}

bool hasWord(std::string_view s) { return std::any_of(s.begin(), s.end(), wordByte); }

std::size_t words(std::string_view s) {
  std::size_t n = 0;
  bool in = false;
  for (const char c : s) {
    const bool w = wordByte(c);
    n += w && !in ? 1 : 0;
    in = w;
  }
  return n;
}

/// The offset in `n.text` of the first match of `re` at or after `from`, and its end.
bool find(const re2::RE2& re, const Normalised& n, std::size_t from, std::size_t& begin,
          std::size_t& end) {
  const re2::StringPiece text(n.text);
  re2::StringPiece m;
  if (from > text.size() || !re.Match(text, from, text.size(), re2::RE2::UNANCHORED, &m, 1))
    return false;
  begin = static_cast<std::size_t>(m.data() - text.data());
  end = begin + m.size();
  return true;
}

/// Byte of `sentence` where normalised offset `at` comes from (its size past the end).
std::size_t original(const Normalised& n, std::size_t at, std::size_t size) {
  return at < n.from.size() ? n.from[at] : size;
}

void append(std::string& out, std::string_view part) {
  if (!hasWord(part)) return;
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (space(part.front())) part.remove_prefix(1);
  while (space(part.back())) part.remove_suffix(1);
  if (!out.empty()) out += ' ';
  out += part;
}

/// Words that talk about the documents, or fill, rather than assert: "Based on the provided
/// context, …", "Sorry, …" before an abstention are no claim.
bool leadIn(std::string_view token) {
  static constexpr std::string_view kWords[] = {
      "based",     "given",     "provided", "context",       "contexts",
      "document",  "documents", "passage",  "passages",      "source",
      "sources",   "text",      "texts",    "information",   "retrieved",
      "available", "according", "sorry",    "unfortunately", "well",
      "honestly",  "oh",        "hmm",      "yes",           "no",
      "ok",        "okay",      "actually"};
  return std::find(std::begin(kWords), std::end(kWords), token) != std::end(kWords);
}

/// Whether `text` states a fact of its own: a figure, a name (a capitalised word past the
/// first), or (unless `strict`) two content words that are not lead-in words.
bool assertsFact(std::string_view text, bool strict) {
  std::size_t content = 0;
  bool first = true;
  for (const auto& t : tokenizeDetailed(text)) {
    if (t.numeric) return true;
    if (t.capitalized && !first && t.text != "i") return true;
    first = false;
    if (!isStopword(t.text) && !leadIn(t.text)) ++content;
  }
  return !strict && content >= 2;
}

SentenceAbstention abstention(std::string_view sentence, int depth) {
  SentenceAbstention out;
  const Normalised n = normalise(sentence);
  std::size_t ms = 0, me = 0;
  if (!find(patterns().abstention, n, 0, ms, me)) return out;
  out.abstains = true;
  // Before: up to the last connector that precedes the abstention ("X, but I don't know Y"),
  // one pass; without one, the text before it when it states a fact of its own ("Acme was
  // founded in 1971, I'm not sure.": a lie must not hide behind a hedge).
  std::size_t last_connector = std::string::npos;
  re2::StringPiece scan(n.text.data(), ms), connector_match;
  while (re2::RE2::FindAndConsume(&scan, patterns().connector, &connector_match))
    last_connector = static_cast<std::size_t>(connector_match.data() - n.text.data());
  const std::string_view before = sentence.substr(
      0, original(n, last_connector != std::string::npos ? last_connector : ms, sentence.size()));
  if (assertsFact(before, false)) append(out.asserted, before);
  // After: from a connector, a concession's comma, or a boundary followed by 3 words or more.
  std::size_t rest = std::string::npos, cb = 0, ce = 0, bb = 0, be = 0;
  const bool connector = find(patterns().connector, n, me, cb, ce);
  const bool boundary = find(patterns().boundary, n, me, bb, be);
  // A connector right after the boundary (", but …") is the same cut.
  if (connector && (!boundary || cb <= bb || n.text.find_first_not_of(' ', be) == cb)) {
    rest = original(n, ce, sentence.size());
  } else if (boundary) {
    const std::size_t at = original(n, be, sentence.size());
    const bool concession = re2::RE2::PartialMatch(n.text, patterns().concession);
    // An aside ("…, unfortunately.") is not a claim; 3 words or a figure are ("…: 10 years").
    const std::string_view tail = sentence.substr(at);
    if (concession || words(tail) >= 3 || std::any_of(tail.begin(), tail.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        }))
      rest = at;
  }
  if (rest == std::string::npos) {
    // No cut: what follows the phrase is asserted when it holds a figure or a name ("I don't
    // know why Acme was founded in 1971"), not when it is the object of the doubt ("I don't
    // know the name of the drummer").
    const std::string_view tail =
        sentence.substr(std::min(original(n, me, sentence.size()), sentence.size()));
    if (assertsFact(tail, true)) append(out.asserted, tail);
    return out;
  }
  if (rest >= sentence.size()) return out;
  const std::string_view after = sentence.substr(rest);
  if (const auto again = depth < 8 ? abstention(after, depth + 1) : SentenceAbstention{};
      again.abstains)
    append(out.asserted, again.asserted);
  else
    append(out.asserted, after);
  return out;
}

}  // namespace

SentenceAbstention sentenceAbstention(std::string_view sentence) { return abstention(sentence, 0); }

std::string abstentionPhrase(std::string_view text) {
  const Normalised n = normalise(text);
  std::size_t begin = 0, end = 0;
  if (!find(patterns().abstention, n, 0, begin, end)) return {};
  return n.text.substr(begin, end - begin);
}

bool answerAbstains(std::string_view answer) {
  bool any = false;
  for (const auto& [begin, end] : sentenceSpans(answer)) {
    const std::string_view s = answer.substr(begin, end - begin);
    if (!hasWord(s)) continue;
    const auto a = sentenceAbstention(s);
    if (!a.abstains || !a.asserted.empty()) return false;
    any = true;
  }
  return any;
}

}  // namespace assay
