#include "judges/checks.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <unordered_set>

#include "judges/abstention.hpp"
#include "judges/tokenizer.hpp"
#include "judges/user_regex.hpp"

namespace assay {
namespace {

constexpr OptionSpec kCitesOptions[] = {
    {"patterns", OptionType::kStringList,
     "extra regexes (RE2 syntax, case-insensitive) that count as a citation, e.g. 'Source: \\w+'"},
};
constexpr OptionSpec kContextCountOptions[] = {
    {"min", OptionType::kInt, "fewest retrieved contexts, >= 0; default 1", true, "1"},
    {"max", OptionType::kInt, "most retrieved contexts; 0 = no limit (default)", true, "0"},
};
constexpr OptionSpec kAnswerLengthOptions[] = {
    {"min_chars", OptionType::kInt, "shortest answer in Unicode code points; default 1", true, "1"},
    {"max_chars", OptionType::kInt, "longest answer in code points; 0 = no limit (default)", true,
     "0"},
};
constexpr OptionSpec kRefusalOptions[] = {
    {"patterns", OptionType::kStringList,
     "extra regexes (RE2 syntax, case-insensitive) that mark a refusal"},
};

// Lower-cases (Unicode) and maps the typographic apostrophe to ', so built-in phrases match
// "I don’t know", "JE SUIS DÉSOLÉ" and "je ne sais pas" alike.
std::string normaliseForPhrases(std::string_view text) {
  const std::string s = toLowerUtf8(text);
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "\xE2\x80\x99") == 0) {  // U+2019
      out.push_back('\'');
      i += 2;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

// Built-in refusal phrases (lower case). English and French.
constexpr std::array<std::string_view, 44> kRefusalPhrases = {
    "i don't know", "i do not know", "i'm not sure", "i am not sure", "i cannot answer",
    "i can't answer", "i'm unable to", "i am unable to", "i'm not able to", "i am not able to",
    "i cannot help", "i can't help", "i cannot provide", "i can't provide", "i'm sorry, but",
    "i am sorry, but", "no information about", "does not contain information",
    "doesn't contain information", "does not provide information", "doesn't provide information",
    "not enough information", "insufficient information", "the context does not",
    "the provided context does not", "the documents do not", "i have no information",
    "i don't have information", "i don't have enough information", "unable to find",
    "cannot be determined from",
    // French
    "je ne sais pas", "je ne peux pas", "je suis désolé", "je suis désolée",
    "je n'ai pas d'information", "je n'ai pas assez d'information", "aucune information",
    "pas assez d'information", "le contexte ne", "impossible de répondre",
    "je ne suis pas en mesure", "les documents ne", "je n'ai pas trouvé"};

}  // namespace

Patterns compilePatterns(const std::vector<std::string>& patterns, const std::string& key) {
  Patterns out;
  if (const auto why = userPatternCountProblem(patterns.size()); !why.empty())
    throw OptionError(key, why);
  re2::RE2::Options options = userRegexOptions();
  options.set_case_sensitive(false);
  for (const auto& p : patterns) {
    auto re = std::make_shared<const re2::RE2>(p, options);
    if (const auto why = userRegexProblem(*re); !why.empty())
      throw OptionError(key, "pattern '" + p + "': " + why);
    out.push_back(std::move(re));
  }
  return out;
}

// ---- answer_nonempty ---------------------------------------------------------------------------

const JudgeDescriptor AnswerNonemptyJudge::kDescriptor{
    "answer_nonempty",
    JudgeKind::kCheck,
    "non_empty",
    0.0,
    1.0,
    kPassFailBuckets,
    {},
    CostClass::kCpuMicroseconds,
    "the answer has at least one non-white-space character"};

std::unique_ptr<Judge> AnswerNonemptyJudge::create(const JudgeOptionValues&) {
  return std::make_unique<AnswerNonemptyJudge>();
}

Verdict AnswerNonemptyJudge::judge(const Event& e) const {
  const bool blank = isBlank(e.answer);
  return Verdict::check(!blank, blank ? "answer is empty or white space" : "");
}

// ---- cites_source ------------------------------------------------------------------------------

const JudgeDescriptor CitesSourceJudge::kDescriptor{
    "cites_source",
    JudgeKind::kCheck,
    "citation",
    0.0,
    1.0,
    kPassFailBuckets,
    kCitesOptions,
    CostClass::kCpuMicroseconds,
    "the answer references at least one retrieved context"};

CitesSourceJudge::CitesSourceJudge(const CitesSourceOptions& o)
    : patterns_(compilePatterns(o.patterns, "patterns")) {}

std::unique_ptr<Judge> CitesSourceJudge::create(const JudgeOptionValues& values) {
  return std::make_unique<CitesSourceJudge>(CitesSourceOptions{values.getStringList("patterns")});
}

Verdict CitesSourceJudge::judge(const Event& e) const {
  if (e.contexts.empty()) return Verdict::fail(Outcome::kNoContext);
  std::unordered_set<std::string_view> ids;
  for (const auto& c : e.contexts)
    if (!c.id.empty()) ids.insert(c.id);
  const std::string_view a = e.answer;
  bool dangling = false;
  // Bracketed markers: [1], [1, 3], [doc-7]; adjacent brackets are scanned one by one.
  // The next ']' is looked for once and kept until an '[' passes it: linear in the answer
  // (900 KB of '[' searched to the end from each '[' took seconds).
  std::size_t close = 0;
  for (std::size_t open = a.find('['); open != std::string_view::npos;
       open = a.find('[', open + 1)) {
    if (close <= open) close = a.find(']', open + 1);
    if (close == std::string_view::npos) break;
    if (close - open > 80) continue;
    std::string_view inside = a.substr(open + 1, close - open - 1);
    std::size_t start = 0;
    while (start <= inside.size()) {
      std::size_t end = inside.find_first_of(",;", start);
      if (end == std::string_view::npos) end = inside.size();
      std::string_view item = inside.substr(start, end - start);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (!item.empty()) {
        if (ids.count(item)) return Verdict::check(true, "cites [" + std::string(item) + "]");
        long n = 0;
        auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
        if (ec == std::errc() && p == item.data() + item.size()) {
          if (n >= 1 && n <= static_cast<long>(e.contexts.size()))
            return Verdict::check(true, "cites [" + std::to_string(n) + "]");
          dangling = true;
        }
      }
      start = end + 1;
    }
  }
  for (const auto& c : e.contexts) {
    if (c.source.size() >= 8 && a.find(c.source) != std::string_view::npos)
      return Verdict::check(true, "cites " + c.source);
  }
  for (const auto& re : patterns_) {
    if (re2::RE2::PartialMatch(e.answer, *re))
      return Verdict::check(true, "matches a citation pattern");
  }
  return Verdict::check(false, dangling ? "citation markers point to no retrieved context"
                                        : "no citation of a retrieved context");
}

// ---- context_count -----------------------------------------------------------------------------

const JudgeDescriptor ContextCountJudge::kDescriptor{
    "context_count",
    JudgeKind::kCheck,
    "retrieval_count",
    0.0,
    1.0,
    kPassFailBuckets,
    kContextCountOptions,
    CostClass::kCpuMicroseconds,
    "the number of retrieved contexts is within [min, max]"};

std::unique_ptr<Judge> ContextCountJudge::create(const JudgeOptionValues& values) {
  ContextCountOptions o;
  const auto mn = values.getInt("min", 1), mx = values.getInt("max", 0);
  if (mn < 0 || mn > 100000) throw OptionError("min", "must be between 0 and 100000");
  if (mx < 0 || mx > 100000) throw OptionError("max", "must be between 0 and 100000");
  if (mx != 0 && mx < mn)
    throw OptionError("max", "must be at least min (" + std::to_string(mn) + ")");
  o.min = static_cast<int>(mn);
  o.max = static_cast<int>(mx);
  return std::make_unique<ContextCountJudge>(o);
}

Verdict ContextCountJudge::judge(const Event& e) const {
  const auto n = static_cast<long>(e.contexts.size());
  const bool ok = n >= options_.min && (options_.max == 0 || n <= options_.max);
  return Verdict::check(ok, std::to_string(n) + (n == 1 ? " context" : " contexts"));
}

// ---- answer_length -----------------------------------------------------------------------------

const JudgeDescriptor AnswerLengthJudge::kDescriptor{
    "answer_length",
    JudgeKind::kCheck,
    "length",
    0.0,
    1.0,
    kPassFailBuckets,
    kAnswerLengthOptions,
    CostClass::kCpuMicroseconds,
    "the answer's length in characters is within [min_chars, max_chars]"};

std::unique_ptr<Judge> AnswerLengthJudge::create(const JudgeOptionValues& values) {
  AnswerLengthOptions o;
  o.min_chars = values.getInt("min_chars", 1);
  o.max_chars = values.getInt("max_chars", 0);
  if (o.min_chars < 0) throw OptionError("min_chars", "must be >= 0");
  if (o.max_chars < 0) throw OptionError("max_chars", "must be >= 0");
  if (o.max_chars != 0 && o.max_chars < o.min_chars)
    throw OptionError("max_chars",
                      "must be at least min_chars (" + std::to_string(o.min_chars) + ")");
  return std::make_unique<AnswerLengthJudge>(o);
}

Verdict AnswerLengthJudge::judge(const Event& e) const {
  const auto n = static_cast<long>(codepointCount(e.answer));
  const bool ok = n >= options_.min_chars && (options_.max_chars == 0 || n <= options_.max_chars);
  return Verdict::check(ok, std::to_string(n) + " chars");
}

// ---- refusal -----------------------------------------------------------------------------------

const JudgeDescriptor RefusalJudge::kDescriptor{
    "refusal", JudgeKind::kCheck, "refusal", 0.0, 1.0, kPassFailBuckets, kRefusalOptions,
    CostClass::kCpuMicroseconds,
    "label: 1 when the answer declines or says it does not know (English, French)",
    kCannotJudgeOutcomes,
    // Bumped when the phrases change: the abstention detector's phrases joined the list.
    "abstention-phrases-1"};

RefusalJudge::RefusalJudge(const std::vector<std::string>& patterns)
    : patterns_(compilePatterns(patterns, "patterns")) {}

std::unique_ptr<Judge> RefusalJudge::create(const JudgeOptionValues& values) {
  return std::make_unique<RefusalJudge>(values.getStringList("patterns"));
}

std::string RefusalJudge::matchedPhrase(std::string_view answer) const {
  const std::string norm = normaliseForPhrases(answer);
  for (auto phrase : kRefusalPhrases)
    if (norm.find(phrase) != std::string::npos) return std::string(phrase);
  // The abstention detector's phrases too ("Not stated in the documents."): an answer
  // claim_support calls `abstained` is a refusal here (judges/abstention.hpp).
  if (auto phrase = abstentionPhrase(answer); !phrase.empty()) return phrase;
  for (const auto& re : patterns_) {
    re2::StringPiece m;
    if (re->Match(norm, 0, norm.size(), re2::RE2::UNANCHORED, &m, 1)) return std::string(m);
  }
  return {};
}

Verdict RefusalJudge::judge(const Event& e) const {
  auto phrase = matchedPhrase(e.answer);
  const bool refused = !phrase.empty();
  return Verdict::ok(refused ? 1.0 : 0.0, refused ? "says \"" + phrase + "\"" : std::string{});
}

}  // namespace assay
