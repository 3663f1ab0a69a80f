#include "judges/redaction.hpp"

#include <arpa/inet.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
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
  // Case-insensitive, the match may run on into the next words ("GB82 WEST … 32 please"): the
  // longest prefix ending at a space (or at the match's end) that passes mod 97 wins.
  for (std::size_t e = end; e > begin; --e) {
    if (e != end && text[e] != ' ') continue;
    value.clear();
    for (char c : text.substr(begin, e - begin))
      if (c != ' ') value.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
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
  return inet_pton(AF_INET, value.c_str(), buf) == 1 && notInsideWord(text, begin, end);
}

bool checkPhone(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
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

bool checkToken(std::string_view text, std::size_t& begin, std::size_t& end, std::string& value) {
  // A sentence's final period or a closing bracket is not part of the token.
  while (end > begin && (text[end - 1] == '.' || text[end - 1] == ',' || text[end - 1] == ')'))
    --end;
  std::string_view t = text.substr(begin, end - begin);
  if (t.size() > 7 &&
      (t.substr(0, 6) == "Bearer" || t.substr(0, 6) == "bearer" || t.substr(0, 6) == "BEARER")) {
    t.remove_prefix(6);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  }
  value.assign(t);  // "Bearer X" and X alone are the same token
  return value.size() >= 16;
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
    {"email", "EMAIL",
     R"([A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}[A-Za-z0-9])?)"
     R"((?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24})",
     checkEmail},
    {"card", "CARD", R"(\b[0-9](?:[ \-]?[0-9]){12,18}\b)", checkCard},
    {"iban", "IBAN", R"((?i:\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b))", checkIban},
    {"token", "TOKEN",
     R"((?i:\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*))"
     R"(|\bsk-(?:proj-|ant-|svcacct-)?[A-Za-z0-9_\-]{20,})"
     R"(|\bAKIA[0-9A-Z]{16}\b)"
     R"(|\bgh[pousr]_[A-Za-z0-9]{36,}\b)"
     R"(|\bxox[abprs]-[A-Za-z0-9\-]{10,})"
     R"(|\bAIza[0-9A-Za-z_\-]{35})"
     R"(|\bglpat-[A-Za-z0-9_\-]{20,})"
     R"(|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})",
     checkToken},
    {"ip", "IP",
     R"(\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b)"
     R"(|(?i:\b(?:[0-9a-f]{1,4}:){1,7}(?::|(?::[0-9a-f]{1,4}){1,7}|[0-9a-f]{1,4})\b))"
     R"(|::(?i:[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){0,6})\b)",
     checkIp},
    {"phone", "PHONE",
     R"(\+[1-9][0-9]{0,2}(?:[ .\-]?\(?[0-9]{1,4}\)?){2,6})"
     R"(|\(?\b0[0-9]{1,4}\)?(?:[ .\-]?[0-9]{2,4}){2,5}\b)"
     R"(|\(?\b[2-9][0-9]{2}\)?[ .\-][0-9]{3}[ .\-][0-9]{4}\b)",
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
    if (!d->re->ok()) throw std::logic_error("built-in detector " + name + ": " + d->re->error());
    labels_.push_back(name);
    detectors_.push_back(std::move(d));
  }
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
    std::size_t begin, end, detector;
    std::string value;
  };
  std::vector<Match> found;
  const re2::StringPiece whole(text.data(), text.size());
  for (std::size_t d = 0; d < r_->detectors_.size(); ++d) {
    const auto& det = *r_->detectors_[d];
    std::size_t pos = 0;
    re2::StringPiece m;
    while (pos < text.size() &&
           det.re->Match(whole, pos, text.size(), re2::RE2::UNANCHORED, &m, 1)) {
      auto begin = static_cast<std::size_t>(m.data() - text.data());
      auto end = begin + m.size();
      std::string value;
      if (end > begin && det.check(text, begin, end, value) && end > begin)
        found.push_back({begin, end, d, std::move(value)});
      pos = std::max(static_cast<std::size_t>(m.data() - text.data()) + m.size(),
                     static_cast<std::size_t>(m.data() - text.data()) + 1);
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
  return out;
}

}  // namespace assay
