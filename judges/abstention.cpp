#include "judges/abstention.hpp"

#include <re2/re2.h>

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
    R"(|\bi (?:do not|don't|dont|did not|didn't|really don't) know\b)"
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

constexpr const char* kConnector = R"(\b(?:but|however|mais|cependant)\b)";
// "While the text does not say X, it implies Y": the concession ends at its comma.
constexpr const char* kConcession = R"(^(?:while|although|though|even though|bien que|même si)\b)";

const re2::RE2& abstentionRe() {
  static const re2::RE2 re(kAbstention);
  return re;
}

const re2::RE2& connectorRe() {
  static const re2::RE2 re(kConnector);
  return re;
}

const re2::RE2& concessionRe() {
  static const re2::RE2 re(kConcession);
  return re;
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

bool hasWord(std::string_view s) {
  for (const char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80)
      return true;
  return false;
}

}  // namespace

SentenceAbstention sentenceAbstention(std::string_view sentence) {
  SentenceAbstention out;
  const Normalised n = normalise(sentence);
  re2::StringPiece match;
  const re2::StringPiece text(n.text);
  if (!abstentionRe().Match(text, 0, text.size(), re2::RE2::UNANCHORED, &match, 1)) return out;
  out.abstains = true;
  out.asserted_from = sentence.size();
  const auto after = static_cast<std::size_t>(match.data() - text.data()) + match.size();
  std::size_t end = n.text.size();  // where the asserted part starts, in the normalised text
  re2::StringPiece connector;
  if (connectorRe().Match(text, after, text.size(), re2::RE2::UNANCHORED, &connector, 1))
    end = static_cast<std::size_t>(connector.data() - text.data()) + connector.size();
  else if (const auto comma = n.text.find(',', after);
           comma != std::string::npos && re2::RE2::PartialMatch(text, concessionRe()))
    end = comma + 1;
  const std::size_t from = end < n.from.size() ? n.from[end] : sentence.size();
  if (hasWord(sentence.substr(from))) out.asserted_from = from;
  return out;
}

bool answerAbstains(std::string_view answer) {
  bool any = false;
  for (const auto& [begin, end] : sentenceSpans(answer)) {
    const std::string_view s = answer.substr(begin, end - begin);
    if (!hasWord(s)) continue;
    const auto a = sentenceAbstention(s);
    if (!a.abstains || a.asserted_from < s.size()) return false;
    any = true;
  }
  return any;
}

}  // namespace assay
