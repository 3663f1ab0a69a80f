#include "judges/redaction.hpp"

#include <arpa/inet.h>
#include <re2/re2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "judges/user_regex.hpp"

namespace assay {

bool luhnValid(std::string_view digits) {
  if (digits.empty()) return false;
  int sum = 0;
  bool twice = false;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (*it < '0' || *it > '9') return false;
    int d = *it - '0';
    if (twice) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
    twice = !twice;
  }
  return sum % 10 == 0;
}

bool ibanValid(std::string_view iban) {
  if (iban.size() < 15 || iban.size() > 34) return false;
  // Move the first four characters to the end, letters as 10..35, then mod 97 piecewise.
  int rem = 0;
  const auto feed = [&](char c) {
    if (c >= '0' && c <= '9') {
      rem = (rem * 10 + (c - '0')) % 97;
      return true;
    }
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (u < 'A' || u > 'Z') return false;
    rem = (rem * 100 + (u - 'A' + 10)) % 97;
    return true;
  };
  for (std::size_t i = 4; i < iban.size(); ++i)
    if (!feed(iban[i])) return false;
  for (std::size_t i = 0; i < 4; ++i)
    if (!feed(iban[i])) return false;
  return rem == 1;
}

namespace {

bool isAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

/// The built-in detectors match an ASCII copy of the text, one byte per code point kept, and
/// map each match back to the original bytes: what people type between and inside values is
/// folded to what the patterns know (docs/configuration.md, "What each detector covers").
///   - a decimal digit of any script (Unicode Nd: full-width, Arabic-Indic, Devanagari…) → its
///     ASCII digit;
///   - a space separator (Zs: no-break, narrow no-break, thin, ideographic…) → ' ';
///   - a dash (Pd: hyphen, en and em dash, non-breaking hyphen…) and the minus sign → '-';
///   - the full-width forms of ASCII (U+FF01–U+FF5E) → ASCII, the ideographic and half-width
///     full stops → '.';
///   - a format character (Cf: zero-width space and joiners, soft hyphen, word joiner, BOM,
///     bidirectional marks) → nothing: it joins the characters around it;
///   - any other letter or mark → \x01, any other character → \x02 (an e-mail address may hold
///     \x01; no other detector matches either).
/// Invalid UTF-8 (never in an event: event_parser refuses it) is \x02 per byte.
struct Normalized {
  std::string text;                 // ASCII and \x01/\x02
  std::vector<std::uint32_t> from;  // per byte of text: first byte of its code point
  std::vector<std::uint32_t> to;    // per byte of text: past its code point
  bool identity = true;             // text is the original (pure ASCII): no map
  /// The original range of text[begin, end).
  std::pair<std::size_t, std::size_t> original(std::size_t begin, std::size_t end) const {
    if (identity) return {begin, end};
    return {from[begin], to[end - 1]};
  }
};

char fold(UChar32 c) {
  if (c >= 0xFF01 && c <= 0xFF5E) return static_cast<char>(c - 0xFEE0);
  if (c == 0x3002 || c == 0xFF61) return '.';
  if (c == 0x2212 || c == 0xFE63) return '-';
  switch (u_charType(c)) {
    case U_DECIMAL_DIGIT_NUMBER:
      return static_cast<char>('0' + u_charDigitValue(c));
    case U_SPACE_SEPARATOR:
      return ' ';
    case U_DASH_PUNCTUATION:
      return '-';
    case U_FORMAT_CHAR:
      return '\0';  // dropped
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return '\x01';
    default:
      return '\x02';
  }
}

Normalized normalize(std::string_view s) {
  Normalized n;
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
    return n;  // the original serves as it is
  n.identity = false;
  n.text.reserve(s.size());
  n.from.reserve(s.size());
  n.to.reserve(s.size());
  const auto len = static_cast<std::int32_t>(s.size());
  for (std::int32_t i = 0; i < len;) {
    const std::int32_t start = i;
    UChar32 c = 0;
    U8_NEXT(s.data(), i, len, c);
    const char f = c < 0 ? '\x02' : c < 0x80 ? static_cast<char>(c) : fold(c);
    if (f == '\0' && c >= 0x80) continue;  // a format character joins its neighbours
    n.text.push_back(f);
    n.from.push_back(static_cast<std::uint32_t>(start));
    n.to.push_back(static_cast<std::uint32_t>(i));
  }
  return n;
}

/// An e-mail address's identity: its original code points in lower case, format characters
/// dropped ("Jürgen@Example.org" and "jürgen@example.org" are one address).
std::string foldedOriginal(std::string_view s) {
  std::string out;
  const auto len = static_cast<std::int32_t>(s.size());
  for (std::int32_t i = 0; i < len;) {
    UChar32 c = 0;
    U8_NEXT(s.data(), i, len, c);
    if (c < 0 || (c >= 0x80 && u_charType(c) == U_FORMAT_CHAR)) continue;
    c = u_tolower(c);
    char buf[U8_MAX_LENGTH];
    std::int32_t k = 0;
    U8_APPEND_UNSAFE(buf, k, c);
    out.append(buf, static_cast<std::size_t>(k));
  }
  return out;
}

std::string digitsOf(std::string_view s) {
  std::string d;
  for (char c : s)
    if (c >= '0' && c <= '9') d.push_back(c);
  return d;
}

// Each check may narrow [begin, end) and sets the value that numbers the placeholder.
using Check = bool (*)(std::string_view text, std::size_t& begin, std::size_t& end,
                       std::string& value);

bool notInsideWord(std::string_view text, std::size_t begin, std::size_t end) {
  return (begin == 0 || !isAlnum(text[begin - 1])) && (end >= text.size() || !isAlnum(text[end]));
}

bool checkEmail(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  value.assign(text.substr(begin, end - begin));
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return true;
}

bool checkCard(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  // The match may run into a neighbouring number ("4111 1111 1111 1111 10 EUR", "order 12 4111
  // …"): every run of whole digit groups within it is a candidate, the longest (then leftmost)
  // of 13–19 digits that passes Luhn wins. Groups are never split.
  std::vector<std::pair<std::size_t, std::size_t>> groups;  // [first digit, past last digit)
  for (std::size_t i = begin; i < end;) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    const std::size_t g = i;
    while (i < end && text[i] >= '0' && text[i] <= '9') ++i;
    groups.emplace_back(g, i);
  }
  std::size_t best_digits = 0;
  for (std::size_t a = 0; a < groups.size(); ++a) {
    for (std::size_t b = a; b < groups.size(); ++b) {
      const auto digits =
          digitsOf(text.substr(groups[a].first, groups[b].second - groups[a].first));
      if (digits.size() > 19) break;
      if (digits.size() < 13 || digits.size() <= best_digits || !luhnValid(digits) ||
          !notInsideWord(text, groups[a].first, groups[b].second))
        continue;
      best_digits = digits.size();
      value = digits;
      begin = groups[a].first;
      end = groups[b].second;
    }
  }
  return best_digits > 0;
}

bool checkIban(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  // Case-insensitive, grouped by spaces, dots or hyphens; the match may run on into the next
  // words ("GB82 WEST … 32 please"): the longest prefix ending at a separator (or at the
  // match's end) that passes mod 97 wins.
  const auto separator = [](char c) { return c == ' ' || c == '.' || c == '-' || c == '/'; };
  for (std::size_t e = end; e > begin; --e) {
    if (e != end && !separator(text[e])) continue;
    if (separator(text[e - 1])) continue;
    value.clear();
    for (char c : text.substr(begin, e - begin))
      if (!separator(c))
        value.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    if (value.size() < 15) return false;
    if (ibanValid(value) && notInsideWord(text, begin, e)) {
      end = e;
      return true;
    }
  }
  return false;
}

bool checkIp(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  value.assign(text.substr(begin, end - begin));
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  unsigned char buf[16];
  if (value.find(':') != std::string::npos)
    return value.size() <= 45 && inet_pton(AF_INET6, value.c_str(), buf) == 1;
  // Dotted quad, each part 0-255; leading zeros allowed ("010.001.002.003" is 10.1.2.3, as
  // people write it; inet_pton refuses them). The value is the canonical form.
  std::string canonical;
  int parts = 0;
  for (std::size_t i = 0; i < value.size();) {
    unsigned part = 0;
    std::size_t k = i;
    while (k < value.size() && value[k] >= '0' && value[k] <= '9' && k - i < 3)
      part = part * 10 + static_cast<unsigned>(value[k++] - '0');
    if (k == i || part > 255 || (k < value.size() && value[k] != '.')) return false;
    canonical += (parts++ ? "." : "") + std::to_string(part);
    i = k + 1;
  }
  value = canonical;
  return parts == 4 && notInsideWord(text, begin, end);
}

/// A calendar date written with one separator ("01/02/2024", "15.01.24", "2024-01-15"): digit
/// groups day/month/year or year/month/day, months 1-12, days 1-31.
bool looksLikeDate(std::string_view s) {
  std::vector<std::string_view> groups;
  char sep = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && s[i] >= '0' && s[i] <= '9') continue;
    if (i < s.size()) {
      if (sep == 0) sep = s[i];
      if (s[i] != sep || (sep != '/' && sep != '.' && sep != '-')) return false;
    }
    groups.push_back(s.substr(start, i - start));
    start = i + 1;
  }
  if (groups.size() != 3) return false;
  const auto num = [](std::string_view g) { return g.empty() ? -1 : std::stoi(std::string(g)); };
  const auto dm = [&](std::string_view d, std::string_view m) {
    return d.size() <= 2 && m.size() <= 2 && num(d) >= 1 && num(d) <= 31 && num(m) >= 1 &&
           num(m) <= 12;
  };
  const auto& [a, b, c] = std::tie(groups[0], groups[1], groups[2]);
  return (a.size() == 4 && dm(c, b)) ||
         ((c.size() == 2 || c.size() == 4) && (dm(a, b) || dm(b, a)));
}

bool checkPhone(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  // A date is no phone number; one right before a number is left out of it ("due 01/02/2024
  // 020 7946 0958").
  if (looksLikeDate(text.substr(begin, end - begin))) return false;
  // Digits joined to it by a dash, dot or slash make it part of a longer code: an invoice or
  // order number ("2026-0812-0900"), a version, a reference.
  const auto joined = [&](std::size_t sep, std::size_t digit) {
    return (text[sep] == '-' || text[sep] == '.' || text[sep] == '/') && text[digit] >= '0' &&
           text[digit] <= '9';
  };
  if ((begin >= 2 && joined(begin - 1, begin - 2)) ||
      (end + 1 < text.size() && joined(end, end + 1)))
    return false;
  // Dates one after another ("01.02.2024 03.04.2024") are all left.
  for (std::size_t space;
       (space = text.substr(begin, end - begin).find(' ')) != std::string_view::npos &&
       looksLikeDate(text.substr(begin, space));) {
    begin += space;
    while (begin < end && text[begin] == ' ') ++begin;
    if (begin == end || text[begin] < '0' || text[begin] > '9') return false;
  }
  if (looksLikeDate(text.substr(begin, end - begin))) return false;
  // 8–15 digits (E.164 allows at most 15). A match that ran into a following number is cut back
  // at the last separator that leaves at most 15 digits.
  std::size_t digits = 0, cut = end;
  for (std::size_t i = begin; i < end; ++i) {
    if (text[i] >= '0' && text[i] <= '9') {
      if (++digits == 15) cut = i + 1;
    }
  }
  if (digits > 15) {
    while (cut < end && text[cut] >= '0' && text[cut] <= '9') ++cut;  // mid-group: no cut
    std::size_t back = cut;
    while (back > begin && text[back - 1] >= '0' && text[back - 1] <= '9') --back;
    end = back;
    while (end > begin && !(text[end - 1] >= '0' && text[end - 1] <= '9')) --end;
  }
  value = digitsOf(text.substr(begin, end - begin));
  if (text[begin] == '+') value.insert(value.begin(), '+');
  const std::size_t n = value.size() - (value[0] == '+');
  return n >= 8 && n <= 15 && notInsideWord(text, begin, end);
}

/// A PEM block that starts at `begin` with its BEGIN line ending at `end`: extended over the
/// block to its END line (headers such as Proc-Type included; lines broken by newlines or by a
/// JSON string's \n), or, when no END line follows before anything else, over the lines of
/// base64 after the BEGIN line only. Linear: the scan stops at the next "-----" (an END line
/// or the next block's BEGIN) or at the first character no block holds.
std::size_t pemEnd(std::string_view text, std::size_t end) {
  const auto escape = [&](std::size_t i) {
    return text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == 'n' || text[i + 1] == 'r');
  };
  const auto base64 = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
  };
  std::size_t i = end;
  while (i < text.size() && text.compare(i, 5, "-----") != 0) {
    const char c = text[i];
    if (escape(i)) {
      i += 2;
    } else if (base64(c) || c == ':' || c == ',' || c == ' ' || c == '\t' || c == '\r' ||
               c == '\n' || c == '-') {
      ++i;
    } else {
      break;
    }
  }
  if (text.compare(i, 9, "-----END ") == 0) {
    const auto close = text.find("-----", i + 9);
    if (close != std::string_view::npos && close - i < 64) return close + 5;
  }
  // No END line: the base64 lines after the BEGIN line, each whole (a line of prose is kept).
  std::size_t at = end;
  for (;;) {
    std::size_t k = at, breaks = 0;
    while (k < text.size() &&
           (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n' || escape(k))) {
      if (text[k] == '\n' || escape(k)) ++breaks;
      k += escape(k) ? 2 : 1;
    }
    if (breaks == 0) return at;
    std::size_t line = k;
    while (line < text.size() && base64(text[line])) ++line;
    const bool whole = line > k && (line == text.size() || text[line] == '\n' ||
                                    text[line] == '\r' || escape(line) || text[line] == '"');
    if (!whole) return at;
    at = line;
  }
}

bool checkToken(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  if (text.compare(begin, 10, "-----BEGIN") == 0) {
    end = pemEnd(text, end);
    value.assign(text.substr(begin, end - begin));
    return true;
  }
  // A credential header or key ("Authorization: Basic …", "\"x-api-key\": \"…\"",
  // "OPENAI_API_KEY=…", "apiKey := \"…\"", "'api_key' => '…'") keeps its name: the value
  // starts after the separator and its quote, and ends before its closing quote.
  std::size_t sep = begin;
  while (sep < end &&
         (std::isalnum(static_cast<unsigned char>(text[sep])) || text[sep] == '-' ||
          text[sep] == '_' || text[sep] == '"' || text[sep] == '\'' || text[sep] == '\\'))
    ++sep;
  std::size_t after = sep;
  while (after < end && (text[after] == ' ' || text[after] == '\t')) ++after;
  const bool named = sep > begin && after < end && (text[after] == ':' || text[after] == '=');
  char quote = 0;
  if (named) {
    ++after;
    if (after < end && (text[after] == '=' || text[after] == '>')) ++after;  // := =>
    while (after < end && (text[after] == ' ' || text[after] == '\t')) ++after;
    if (after < end && text[after] == '\\') ++after;
    if (after < end && (text[after] == '"' || text[after] == '\'')) quote = text[after++];
    begin = after;
  }
  if (quote != 0) {  // up to its closing quote (escaped or not)
    if (end > begin && text[end - 1] == quote) --end;
    if (end > begin && text[end - 1] == '\\') --end;
  } else {
    // A sentence's final period or a closing bracket is not part of the token.
    while (end > begin && (text[end - 1] == '.' || text[end - 1] == ',' || text[end - 1] == ';' ||
                           text[end - 1] == ')' || text[end - 1] == ' ' || text[end - 1] == '\r'))
      --end;
  }
  std::string_view t = text.substr(begin, end - begin);
  if (t.size() > 7 &&
      (t.substr(0, 6) == "Bearer" || t.substr(0, 6) == "bearer" || t.substr(0, 6) == "BEARER")) {
    t.remove_prefix(6);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  }
  value.assign(t);  // "Bearer X" and X alone are the same token
  return value.size() >= (named ? 8u : 16u);
}

bool checkAny(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  value.assign(text.substr(begin, end - begin));
  return end > begin;
}

struct Builtin {
  std::string_view name, type, regex;
  Check check;
};

// RE2 syntax (https://github.com/google/re2/wiki/Syntax): no backreferences or lookaround.
constexpr Builtin kBuiltins[] = {
    // \x01 is a letter of another script (normalize()): internationalized addresses.
    {"email", "EMAIL",
     R"([A-Za-z0-9\x01][A-Za-z0-9\x01._%+\-]{0,63}@[A-Za-z0-9\x01])"
     R"((?:[A-Za-z0-9\x01\-]{0,62}[A-Za-z0-9\x01])?)"
     R"((?:\.[A-Za-z0-9\x01](?:[A-Za-z0-9\x01\-]{0,62}[A-Za-z0-9\x01])?)*\.[A-Za-z\x01]{2,24})",
     checkEmail},
    {"card", "CARD", R"(\b[0-9](?:[ \-]{0,2}[0-9]){12,18}\b)", checkCard},
    {"iban", "IBAN", R"((?i:\b[A-Z]{2}[0-9]{2}(?:[ .\-/]{0,2}[A-Z0-9]){11,30}\b))", checkIban},
    {"token", "TOKEN",
     // A credential header or key, up to its closing quote, or unquoted, an Authorization
     // header's scheme and its credentials (token68) or auth-params (RFC 9110, section
     // 11.4), another key's one word; the name may be quoted (escaped too: JSON inside a
     // string), prefixed (OPENAI_API_KEY) and followed by ':', '=', ':=' or '=>'.
     R"((?i:(?:\\?["'])?\b(?:proxy-)?authorization(?:\\?["'])?[ \t]*(?::=|=>|[:=])[ \t]*)"
     R"((?:\\?"[^"\\\r\n]{8,}(?:\\?")?|'[^'\r\n]{8,}'?)"
     R"(|[A-Za-z][A-Za-z0-9\-]*[ \t]+[A-Za-z0-9_\-]+[ \t]*=[ \t]*(?:"[^"\r\n]*"|[^\s,"]+))"
     R"((?:[ \t]*,[ \t]*[A-Za-z0-9_\-]+[ \t]*=[ \t]*(?:"[^"\r\n]*"|[^\s,"]+))*)"
     R"(|(?:[A-Za-z][A-Za-z0-9\-]*[ \t]+)?[A-Za-z0-9\-._~+/]{8,}=*)"
     R"((?:[ \t]*,[ \t]*[A-Za-z0-9_\-]+[ \t]*=[ \t]*(?:"[^"\r\n]*"|[^\s,"]+))*)))"
     R"(|(?i:(?:\\?["'])?[A-Za-z0-9_\-]*(?:x-api-key|api[_\-]?key|x-auth-token|auth[_\-]?token)"
     R"(|access[_\-]?token|client[_\-]?secret|secret[_\-]?key)(?:\\?["'])?[ \t]*(?::=|=>|[:=]))"
     R"([ \t]*(?:\\?["'])?[^\s"'\\,;&]{8,}(?:\\?["'])?))"
     R"(|(?i:\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*))"
     R"(|\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})"
     R"(|\b[spr]k_(?:live|test)_[A-Za-z0-9]{16,})"
     R"(|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"
     R"(|\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{40,})"
     R"(|\bxox[abeprs]-[A-Za-z0-9\-]{10,}|\bxapp-[A-Za-z0-9\-]{10,})"
     R"(|\bAIza[0-9A-Za-z_\-]{35}|\bya29\.[A-Za-z0-9_\-]{20,})"
     R"(|\bglpat-[A-Za-z0-9_\-]{20,}|\bhf_[A-Za-z0-9]{30,}|\bnpm_[A-Za-z0-9]{36})"
     R"(|\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,})"
     R"(|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"
     // A PEM private key's BEGIN line; checkToken() extends it over its block (pemEnd()).
     R"(|-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)",
     checkToken},
    {"ip", "IP",
     R"(\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b)"
     R"(|(?i:\b(?:[0-9a-f]{1,4}:){1,7}(?::|(?::[0-9a-f]{1,4}){1,7}|[0-9a-f]{1,4})\b))"
     R"(|::(?i:[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){0,6})\b)"
     // IPv4-mapped and -embedded IPv6 (::ffff:192.0.2.1, 64:ff9b::192.0.2.1).
     R"(|(?i:(?:\b[0-9a-f]{1,4})?(?::[0-9a-f]{0,4}){1,6}:(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b))",
     checkIp},
    {"phone", "PHONE",
     R"(\+[1-9][0-9]{0,2}(?:[ .\-/]{0,2}\(?[0-9]{1,4}\)?){2,6})"
     R"(|\(?\b0[0-9]{1,4}\)?(?:[ .\-/]{0,2}[0-9]{2,4}){2,5}\b)"
     R"(|\(?\b[2-9][0-9]{2}\)?[ .\-/]{1,2}[0-9]{3}[ .\-/]{1,2}[0-9]{4}\b)",
     checkPhone},
};

bool validName(std::string_view n) {
  if (n.empty() || n.size() > 32) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

struct Redactor::Detector {
  std::string type;  // placeholder type, upper case
  std::unique_ptr<re2::RE2> re;
  Check check = nullptr;
  bool builtin = false;  // matches the normalized copy (normalize())
};

Redactor::Redactor(const RedactOptions& options) : options_(options) {
  re2::RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(8 << 20);
  for (const auto& name : options.detectors) {
    const auto* b = std::find_if(std::begin(kBuiltins), std::end(kBuiltins),
                                 [&](const Builtin& x) { return x.name == name; });
    if (b == std::end(kBuiltins))
      throw std::invalid_argument("unknown detector '" + name +
                                  "' (known: email, phone, card, iban, ip, token)");
    if (std::find(labels_.begin(), labels_.end(), name) != labels_.end()) continue;
    auto d = std::make_unique<Detector>();
    d->type = std::string(b->type);
    re2::RE2::Options longest = o;
    longest.set_longest_match(true);  // "2001:db8::8a2e:370:7334" whole, not "2001:db8::"
    d->re = std::make_unique<re2::RE2>(std::string(b->regex), longest);
    d->check = b->check;
    d->builtin = true;
    if (!d->re->ok()) throw std::logic_error("built-in detector " + name + ": " + d->re->error());
    labels_.push_back(name);
    detectors_.push_back(std::move(d));
  }
  if (const auto why = userPatternCountProblem(options.patterns.size()); !why.empty())
    throw std::invalid_argument("patterns: " + why);
  for (const auto& [name, regex] : options.patterns) {
    if (!validName(name))
      throw std::invalid_argument("pattern name '" + name +
                                  "': 1 to 32 letters, digits or underscores");
    // Placeholders are upper case: "emp" and "EMP", or a pattern named like a detector,
    // would number two kinds of value as one type.
    const std::string_view mine = name;  // a structured binding cannot be captured (C++20)
    const auto same = [mine](std::string_view other) {
      return other.size() == mine.size() &&
             std::equal(other.begin(), other.end(), mine.begin(), [](char x, char y) {
               return std::toupper(static_cast<unsigned char>(x)) ==
                      std::toupper(static_cast<unsigned char>(y));
             });
    };
    if (std::any_of(labels_.begin(), labels_.end(), same) ||
        std::any_of(std::begin(kBuiltins), std::end(kBuiltins),
                    [&](const Builtin& b) { return same(b.name); }))
      throw std::invalid_argument("pattern name '" + name +
                                  "' is taken (by a detector or another pattern; names are "
                                  "compared without case)");
    auto d = std::make_unique<Detector>();
    d->type = name;
    std::transform(d->type.begin(), d->type.end(), d->type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    d->re = std::make_unique<re2::RE2>(regex, userRegexOptions());
    d->check = checkAny;
    if (const auto why = userRegexProblem(*d->re); !why.empty())
      throw std::invalid_argument("pattern '" + name + "': " + why);
    if (re2::RE2::FullMatch("", *d->re))
      throw std::invalid_argument("pattern '" + name + "' matches the empty string");
    labels_.push_back(name);
    detectors_.push_back(std::move(d));
  }
}

Redactor::~Redactor() = default;

std::string Redactor::Session::apply(std::string_view text) {
  struct Match {
    std::size_t begin, end, detector;  // original bytes
    std::string value;
  };
  std::vector<Match> found;
  const Normalized norm = normalize(text);
  for (std::size_t d = 0; d < r_->detectors_.size(); ++d) {
    const auto& det = *r_->detectors_[d];
    // Built-ins read the normalized copy, user patterns the text as written.
    const std::string_view in = det.builtin && !norm.identity ? norm.text : text;
    const re2::StringPiece whole(in.data(), in.size());
    std::size_t pos = 0;
    int refused = 0;  // matches refused in a row
    re2::StringPiece m;
    while (pos < in.size() && det.re->Match(whole, pos, in.size(), re2::RE2::UNANCHORED, &m, 1)) {
      const auto at = static_cast<std::size_t>(m.data() - in.data());
      auto begin = at, end = at + m.size();
      std::string value;
      if (end > begin && det.check(in, begin, end, value) && end > begin) {
        refused = 0;
        const auto [b, e] =
            in.data() == text.data() ? std::pair{begin, end} : norm.original(begin, end);
        if (det.check == checkEmail && in.data() != text.data())
          value = foldedOriginal(text.substr(b, e - b));
        found.push_back({b, e, d, std::move(value)});
        pos = std::max(end, at + 1);
        continue;
      }
      // Refused ("0612 2024-01-15", a date before a phone number): the value may start at a
      // later word of the same match; looked for again from there, 3 times in a row at most
      // (linear), then after the match.
      std::size_t next = at + 1;
      while (next < at + m.size() && isAlnum(in[next]) && isAlnum(in[next - 1])) ++next;
      while (next < at + m.size() && !isAlnum(in[next])) ++next;
      pos = ++refused <= 3 && next < at + m.size() ? next : std::max(at + m.size(), at + 1);
    }
  }
  if (found.empty()) return std::string(text);
  std::sort(found.begin(), found.end(), [](const Match& a, const Match& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end > b.end;
    return a.detector < b.detector;
  });
  if (next_.size() < r_->detectors_.size()) next_.resize(r_->detectors_.size(), 0);
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (auto& m : found) {
    if (m.begin < at) continue;  // overlaps one already replaced
    out.append(text.substr(at, m.begin - at));
    auto [it, fresh] = numbers_.try_emplace({m.detector, std::move(m.value)}, 0);
    if (fresh) it->second = ++next_[m.detector];
    out += "[" + r_->detectors_[m.detector]->type + "_" + std::to_string(it->second) + "]";
    ++counts_[m.detector];
    at = m.end;
  }
  out.append(text.substr(at));
  return out;
}

Event Redactor::redact(const Event& e, Session& s) const {
  Event out = e;
  out.question = s.apply(e.question);
  for (auto& c : out.contexts) {
    c.id = s.apply(c.id);  // ids reach the prompt beside the texts
    c.text = s.apply(c.text);
    c.source = s.apply(c.source);
  }
  out.answer = s.apply(e.answer);
  if (e.reference) out.reference = s.apply(*e.reference);
  for (auto& f : out.fields) f.second = s.apply(f.second);  // custom rubrics' inputs
  return out;
}

}  // namespace assay
