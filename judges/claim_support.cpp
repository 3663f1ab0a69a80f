#include "judges/claim_support.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "judges/abstention.hpp"
#include "judges/claim_support_model.hpp"
#include "judges/context_overlap.hpp"
#include "judges/tokenizer.hpp"

namespace assay {
namespace {

// Selected on half A of the dev data (claim_support.hpp, docs/claim-support.md).
constexpr double kNumberWeight =
    2.0;  // a figure counts twice (4, context_overlap's, on half A: −0.003)
constexpr double kUnigramShare = 0.5;    // claim = 0.5·u + 0.5·b
constexpr double kClaimsExponent = 0.5;  // answer = 1 − (1 − mean) / claims^0.5
constexpr double kUncitedKeeps = 0.3;    // an uncited sentence in a citing answer: × 0.3
constexpr double kRestatedScore = 0.7;   // an answer that only restates the question
constexpr std::size_t kNegationScope = 3;
constexpr std::size_t kMaxPairGap = 4;   // neighbours: positions at most 4 apart …
constexpr std::size_t kMaxPairSkip = 2;  // … and at most one content token between them
constexpr std::size_t kMaxEvidenceClaim = 200;
constexpr std::size_t kMaxUnsupported = 5;
constexpr std::size_t kMaxEvidenceToken = 40;

constexpr std::pair<std::string_view, std::string_view> kNumberWords[] = {
    {"zero", "0"},
    {"one", "1"},
    {"two", "2"},
    {"three", "3"},
    {"four", "4"},
    {"five", "5"},
    {"six", "6"},
    {"seven", "7"},
    {"eight", "8"},
    {"nine", "9"},
    {"ten", "10"},
    {"eleven", "11"},
    {"twelve", "12"},
    {"thirteen", "13"},
    {"fourteen", "14"},
    {"fifteen", "15"},
    {"sixteen", "16"},
    {"seventeen", "17"},
    {"eighteen", "18"},
    {"nineteen", "19"},
    {"twenty", "20"},
    {"thirty", "30"},
    {"forty", "40"},
    {"fifty", "50"},
    {"sixty", "60"},
    {"seventy", "70"},
    {"eighty", "80"},
    {"ninety", "90"},
    {"hundred", "100"},
    {"thousand", "1000"},
    {"million", "1000000"},
    {"billion", "1000000000"},
    {"first", "1"},
    {"second", "2"},
    {"third", "3"},
    {"fourth", "4"},
    {"fifth", "5"},
    {"sixth", "6"},
    {"seventh", "7"},
    {"eighth", "8"},
    {"ninth", "9"},
    {"tenth", "10"},
    {"eleventh", "11"},
    {"twelfth", "12"},
    // French (un/une are articles far more often than numbers: left out)
    {"deux", "2"},
    {"trois", "3"},
    {"quatre", "4"},
    {"cinq", "5"},
    {"sept", "7"},
    {"huit", "8"},
    {"neuf", "9"},
    {"dix", "10"},
    {"onze", "11"},
    {"douze", "12"},
    {"vingt", "20"},
    {"trente", "30"},
    {"quarante", "40"},
    {"cinquante", "50"},
    {"cent", "100"},
    {"mille", "1000"},
    {"premier", "1"},
    {"première", "1"},
    {"deuxième", "2"},
    {"troisième", "3"},
};

constexpr std::string_view kNegations[] = {
    "not",    "no",      "never", "dont",    "doesnt",  "didnt",    "isnt",    "arent", "wasnt",
    "werent", "cannot",  "cant",  "wont",    "wouldnt", "shouldnt", "couldnt", "hasnt", "havent",
    "hadnt",  "without", "nor",   "neither", "ne",      "pas",      "jamais",  "aucun"};

// Number words and negations in one table: a single hash lookup per token.
struct WordInfo {
  std::string_view digits;  // empty unless a number word
  bool negation = false;
};

const std::unordered_map<std::string_view, WordInfo>& specialWords() {
  static const auto table = [] {
    std::unordered_map<std::string_view, WordInfo> m;
    for (const auto& [word, digits] : kNumberWords) m[word].digits = digits;
    for (auto w : kNegations) m[w].negation = true;
    return m;
  }();
  return table;
}

// "4th", "21st" → the digits; anything else → empty.
std::string_view ordinalDigits(std::string_view w) {
  std::size_t n = 0;
  while (n < w.size() && w[n] >= '0' && w[n] <= '9') ++n;
  if (n == 0 || w.size() != n + 2) return {};
  const auto suffix = w.substr(n);
  if (suffix == "st" || suffix == "nd" || suffix == "rd" || suffix == "th") return w.substr(0, n);
  return {};
}

// Chinese particles, pronouns and conjunctions: one character each, no claim of their own.
bool isCjkFunctionWord(std::string_view c) {
  static constexpr std::string_view kWords[] = {"的", "了", "是", "在", "和", "也", "都", "就",
                                                "而", "及", "与", "或", "这", "那", "它", "他",
                                                "她", "我", "你", "们", "个", "之", "其", "着",
                                                "过", "吗", "呢", "吧", "啊", "把", "被", "将"};
  for (auto w : kWords)
    if (c == w) return true;
  return false;
}

struct Key {
  std::uint64_t hash = 0;
  bool number = false;
  bool content = false;
  bool negation = false;
};

Key keyOf(const Token& t) {
  Key k;
  std::string_view normal;
  const auto& special = specialWords();
  if (const auto it = special.find(t.text); it != special.end()) {
    k.negation = it->second.negation;
    normal = it->second.digits;
  }
  if (normal.empty() && t.numeric) normal = ordinalDigits(t.text);
  k.number = t.numeric || !normal.empty();
  // Not content: stopwords; a lone lower-case letter (the pieces of "e.g.", a unit such as
  // "h"; a capital, as in "vitamin C", stays); Chinese function characters.
  const bool lone_letter = !t.cjk && !k.number && t.text.size() == 1 && !t.capitalized;
  k.content =
      t.cjk ? !isCjkFunctionWord(t.text) : k.number || (!lone_letter && !isStopword(t.text));
  if (!normal.empty()) {
    k.hash = XXH3_64bits(normal.data(), normal.size());
  } else {
    const std::string stem = lightStem(t.text);  // short: kept in the string's own buffer
    k.hash = XXH3_64bits(stem.data(), stem.size());
  }
  return k;
}

std::uint64_t pairHash(std::uint64_t a, std::uint64_t b) {
  const std::array<std::uint64_t, 2> both{a, b};
  return XXH3_64bits(both.data(), sizeof both);
}

// True when one of the `kNegationScope` keys before position i is a negation.
bool negatedAt(const std::vector<Key>& keys, std::size_t i, std::size_t first) {
  for (std::size_t j = i > first + kNegationScope ? i - kNegationScope : first; j < i; ++j)
    if (keys[j].negation) return true;
  return false;
}

bool contains(const std::vector<std::uint64_t>& sorted, std::uint64_t h) {
  return std::binary_search(sorted.begin(), sorted.end(), h);
}

// What the contexts attest: content keys with the polarities seen, and neighbour pairs.
struct Evidence {
  enum : std::uint8_t { kPlain = 1, kNegated = 2 };
  std::vector<std::pair<std::uint64_t, std::uint8_t>> keys;  // sorted, one entry per key
  std::vector<std::uint64_t> pairs;                          // sorted
  std::size_t content_tokens = 0;                            // a feature: the contexts' size

  void add(std::string_view text) {
    const auto tokens = tokenizeDetailed(text);
    std::vector<Key> k;
    k.reserve(tokens.size());
    for (const auto& t : tokens) k.push_back(keyOf(t));
    std::vector<std::size_t> content;
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (!k[i].content) continue;
      ++content_tokens;
      keys.emplace_back(k[i].hash, negatedAt(k, i, 0) ? kNegated : kPlain);
      content.push_back(i);
    }
    for (std::size_t a = 0; a < content.size(); ++a)
      for (std::size_t b = a + 1; b < content.size() && b <= a + kMaxPairSkip; ++b)
        if (content[b] - content[a] <= kMaxPairGap)
          pairs.push_back(pairHash(k[content[a]].hash, k[content[b]].hash));
  }
  void seal() {
    std::sort(keys.begin(), keys.end());
    std::vector<std::pair<std::uint64_t, std::uint8_t>> merged;
    for (const auto& [h, f] : keys) {
      if (!merged.empty() && merged.back().first == h)
        merged.back().second |= f;
      else
        merged.emplace_back(h, f);
    }
    keys = std::move(merged);
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  }
  // 0 when absent, else kPlain | kNegated as seen.
  std::uint8_t polarity(std::uint64_t h) const {
    const auto it = std::lower_bound(keys.begin(), keys.end(), std::pair{h, std::uint8_t{0}});
    return it != keys.end() && it->first == h ? it->second : 0;
  }
};

struct ClaimToken {
  std::uint64_t hash;
  double weight;
  bool supported;
  std::size_t begin, end;
};

struct ClaimScore {
  double score = 0, weight = 0;
  double u = 0, b = 0;  // unigram and contiguous support
};

ClaimScore scoreClaim(const std::vector<ClaimToken>& t, const Evidence& ev) {
  ClaimScore c;
  double supported = 0;
  for (const auto& x : t) {
    c.weight += x.weight;
    supported += x.supported ? x.weight : 0.0;
  }
  if (c.weight == 0) return c;
  const double u = supported / c.weight;
  double b = u;
  if (t.size() >= 2) {
    double pair_weight = 0, pair_supported = 0;
    for (std::size_t i = 0; i + 1 < t.size(); ++i) {
      const double v = std::max(t[i].weight, t[i + 1].weight);
      pair_weight += v;
      if (t[i].supported && t[i + 1].supported &&
          contains(ev.pairs, pairHash(t[i].hash, t[i + 1].hash)))
        pair_supported += v;
    }
    if (pair_weight > 0) b = pair_supported / pair_weight;
  }
  c.score = kUnigramShare * u + (1 - kUnigramShare) * b;
  c.u = u;
  c.b = b;
  return c;
}

std::string clip(std::string_view s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  std::size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // a character boundary
  return std::string(s.substr(0, n)) + "…";
}

std::string_view trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

/// Which sentences carry a citation marker; `any`: some marker in the answer.
std::vector<bool> citedSentences(std::string_view answer,
                                 const std::vector<std::pair<std::size_t, std::size_t>>& spans,
                                 bool& any) {
  std::vector<bool> cited(spans.size(), false);
  any = false;
  for (std::size_t s = 0; s < spans.size(); ++s) {
    const auto [begin, end] = spans[s];
    const std::string_view span = answer.substr(0, end);
    bool leading = s > 0;  // "… a month. [1] It …": a marker before the first word cites back
    for (std::size_t i = begin; i < end; ++i) {
      if (const std::size_t n = citationMarkerLength(span, i); n > 0) {
        (leading ? cited[s - 1] : cited[s]) = true;
        any = true;
        i += n - 1;
      } else if (span[i] != ' ' && span[i] != '\t' && span[i] != '\n' && span[i] != '\r') {
        leading = false;
      }
    }
  }
  return cited;
}

/// What the claims loop counts for the features (kClaimFeatureNames).
struct FeatureCounts {
  double u = 0, b = 0, least_u = 1;  // weighted sums of the claims' u and b; the lowest u
  std::size_t sentences = 0, numbers = 0, numbers_missing = 0, mismatched = 0, tokens = 0,
              asked = 0, weak = 0, names = 0, names_missing = 0;
};

void setFeatures(ClaimSupportDetail& d, const FeatureCounts& f, double total_weight, bool cites,
                 std::size_t context_tokens) {
  const auto share = [](std::size_t part, std::size_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
  };
  const auto ln1p = [](std::size_t n) { return std::log1p(static_cast<double>(n)); };
  d.features = {d.score,
                d.mean,
                d.claims == 0 ? 1.0 : d.least_score,
                f.u / total_weight,
                f.b / total_weight,
                ln1p(d.claims),
                share(d.uncited, d.claims),
                cites ? 1.0 : 0.0,
                share(f.numbers_missing, f.numbers),
                ln1p(f.numbers_missing),
                share(f.mismatched, f.tokens),
                share(f.asked, f.tokens),
                d.restates_question ? 1.0 : 0.0,
                share(d.abstaining, f.sentences),
                ln1p(f.tokens),
                share(f.weak, d.claims),
                f.least_u,
                share(f.names_missing, f.names),
                ln1p(context_tokens)};
}

/// The claim's content tokens (weight, support), counted in `f` too.
void claimTokens(const std::vector<Token>& tokens, const std::vector<Key>& keys,
                 const std::vector<std::uint64_t>& asked, const Evidence& ev,
                 std::vector<ClaimToken>& claim, FeatureCounts& f) {
  claim.clear();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (!keys[i].content) continue;
    const double weight = contains(asked, keys[i].hash) ? 0.0
                          : keys[i].number              ? kNumberWeight
                                                        : 1.0;
    const auto seen = ev.polarity(keys[i].hash);
    const bool negated = negatedAt(keys, i, 0);
    const bool supported =
        negated ? (seen & Evidence::kNegated) != 0 : (seen & Evidence::kPlain) != 0;
    claim.push_back(ClaimToken{keys[i].hash, weight, supported, tokens[i].begin, tokens[i].end});
    ++f.tokens;
    if (weight == 0) {
      ++f.asked;
      continue;
    }
    f.mismatched += seen != 0 && !supported ? 1 : 0;
    if (keys[i].number) {
      ++f.numbers;
      f.numbers_missing += supported ? 0 : 1;
    } else if (tokens[i].capitalized && !tokens[i].sentence_start) {
      ++f.names;
      f.names_missing += supported ? 0 : 1;
    }
  }
}

}  // namespace

ClaimSupportDetail claimSupport(std::string_view question, std::string_view answer,
                                const std::vector<std::string_view>& contexts) {
  Evidence ev;
  for (auto c : contexts) ev.add(c);
  ev.seal();
  std::vector<std::uint64_t> asked;
  for (const auto& t : tokenizeDetailed(question)) asked.push_back(keyOf(t).hash);
  std::sort(asked.begin(), asked.end());

  const auto spans = sentenceSpans(answer);
  bool answer_cites = false;
  const std::vector<bool> cited = citedSentences(answer, spans, answer_cites);

  ClaimSupportDetail d;
  d.empty = true;
  double weighted_sum = 0, total_weight = 0, lowest = 1;
  FeatureCounts f;
  std::vector<ClaimToken> claim;
  std::vector<Key> keys;
  for (std::size_t s = 0; s < spans.size(); ++s) {
    std::string text =
        stripCitationMarkers(answer.substr(spans[s].first, spans[s].second - spans[s].first));
    ++f.sentences;
    // An abstaining sentence asserts nothing; a hedge ("I'm not sure, but …") asserts its rest.
    if (auto a = sentenceAbstention(text); a.abstains) {
      if (d.abstaining++ == 0) d.abstaining_sentence = clip(trimmed(text), kMaxEvidenceClaim);
      if (a.asserted.empty()) continue;
      text = std::move(a.asserted);
    }
    const auto tokens = tokenizeDetailed(text);
    keys.clear();
    for (const auto& t : tokens) keys.push_back(keyOf(t));
    claimTokens(tokens, keys, asked, ev, claim, f);
    if (!claim.empty()) d.empty = false;
    const auto c = scoreClaim(claim, ev);
    if (c.weight == 0) continue;
    ++d.claims;
    d.claim_scores.push_back(c.score);
    weighted_sum += c.score * c.weight;
    total_weight += c.weight;
    f.u += c.u * c.weight;
    f.b += c.b * c.weight;
    f.least_u = std::min(f.least_u, c.u);
    f.weak += c.score < 0.5 ? 1 : 0;
    const auto as_written = [&] {
      const std::size_t from = tokens[0].begin;
      return clip(std::string_view(text).substr(from, tokens.back().end - from), kMaxEvidenceClaim);
    };
    if (answer_cites && !cited[s] && d.uncited++ == 0) d.uncited_claim = as_written();
    if (d.claims == 1 || c.score < lowest) {
      lowest = c.score;
      d.least_claim = as_written();
      d.unsupported.clear();
      for (const auto& t : claim)
        if (!t.supported && t.weight > 0 && d.unsupported.size() < kMaxUnsupported)
          d.unsupported.push_back(
              clip(std::string_view(text).substr(t.begin, t.end - t.begin), kMaxEvidenceToken));
    }
  }
  if (d.claims == 0 && d.abstaining > 0) {
    // Nothing asserted beyond the abstentions (or only the question's own words).
    d.abstained = true;
    return d;
  }
  if (d.empty) return d;
  if (d.claims == 0) {
    d.restates_question = true;
    d.score = kRestatedScore;
    d.mean = 1;
    f.u = f.b = 1;
    total_weight = 1;
    f.least_u = 1;
  } else {
    d.least_score = lowest;
    d.mean = weighted_sum / total_weight;
    d.score = 1 - (1 - d.mean) / std::pow(static_cast<double>(d.claims), kClaimsExponent);
    if (d.uncited > 0) d.score *= kUncitedKeeps;
  }
  setFeatures(d, f, total_weight, answer_cites, ev.content_tokens);
  return d;
}

namespace {
constexpr OptionSpec kClaimSupportOptions[] = {
    {"combination", OptionType::kString,
     "learned (default: the features weighed by the built-in or `weights` model) or formula (the "
     "hand-set score)",
     true, "\"learned\""},
    {"weights", OptionType::kString,
     "a weights file written by scripts/train_claim_support (default: the built-in one)", true, "",
     true},
};
}  // namespace

const JudgeDescriptor ClaimSupportJudge::kDescriptor{
    "claim_support", JudgeKind::kLexical, "faithfulness", 0.0, 1.0, kUnitIntervalBuckets,
    kClaimSupportOptions, CostClass::kCpuMicroseconds,
    "faithfulness proxy: the answer's sentences scored against the contexts (contiguous "
    "support, figures, negation), the least-supported sentence weighing most",
    kFaithfulnessOutcomes,
    // Bumped with the scoring code and with the built-in weights (claim_support_model_test
    // pins their digest next to it).
    "learned-2"};

std::unique_ptr<Judge> ClaimSupportJudge::create(const JudgeOptionValues& values) {
  const std::string combination = values.getString("combination", "learned");
  const std::string weights = values.getString("weights", "");
  if (combination == "formula") {
    if (!weights.empty())
      throw OptionError("weights", "applies to combination: learned only (the formula has none)");
    return std::make_unique<ClaimSupportJudge>();
  }
  if (values.find("weights") && weights.empty())
    throw OptionError("weights", "must not be empty (leave it out for the built-in weights)");
  if (combination != "learned")
    throw OptionError("combination",
                      "expected learned (the default) or formula, got '" + combination + "'");
  try {
    if (weights.empty())
      return std::make_unique<ClaimSupportJudge>(std::shared_ptr<const ClaimSupportModel>(
          std::shared_ptr<void>(), &builtinClaimSupportModel()));
    // The bytes the judge's version hashed, when the config loader read them
    // (JudgeOptionValues::readFiles): the model and its version cannot come from two reads.
    if (const auto* file = values.file("weights")) {
      if (!file->error.empty()) throw std::runtime_error(weights + ": " + file->error);
      return std::make_unique<ClaimSupportJudge>(
          std::make_shared<const ClaimSupportModel>(parseClaimSupportModel(file->bytes, weights)));
    }
    return std::make_unique<ClaimSupportJudge>(
        std::make_shared<const ClaimSupportModel>(loadClaimSupportModel(weights)));
  } catch (const std::runtime_error& e) {
    throw OptionError("weights", e.what());
  }
}

Verdict ClaimSupportJudge::judge(const Event& e) const {
  std::vector<std::string_view> texts;
  for (const auto& c : e.contexts)
    if (!c.text.empty()) texts.push_back(c.text);
  if (texts.empty()) return Verdict::fail(Outcome::kNoContext);
  const auto d = claimSupport(e.question, e.answer, texts);
  if (d.abstained)
    return Verdict::fail(Outcome::kAbstained,
                         "the answer abstains: \"" + d.abstaining_sentence + "\"");
  if (d.empty) return Verdict::fail(Outcome::kEmptyInput, "no content words");
  if (d.restates_question)
    return Verdict::ok(model_ ? model_->score(d.features) : d.score,
                       "the answer only restates the question: no claim of its own");
  std::string evidence;
  if (d.uncited > 0) {
    evidence = "uncited (" + std::to_string(d.uncited) + " of " + std::to_string(d.claims) +
               " sentences cite no context): \"" + d.uncited_claim + "\"";
  }
  if (d.least_score < 1) {
    char score[16];
    std::snprintf(score, sizeof score, "%.2f", d.least_score);
    if (!evidence.empty()) evidence += "; ";
    evidence += std::string("least supported (") + score + "): \"" + d.least_claim + "\"";
    if (!d.unsupported.empty()) {
      evidence += "; unsupported:";
      for (const auto& t : d.unsupported) evidence += " " + t;
    }
  }
  if (d.abstaining > 0)
    evidence += std::string(evidence.empty() ? "" : "; ") + "judged on what it asserts (" +
                std::to_string(d.abstaining) + " sentence(s) abstain: \"" + d.abstaining_sentence +
                "\")";
  return Verdict::ok(model_ ? model_->score(d.features) : d.score, std::move(evidence));
}

// ---- context_recall ----------------------------------------------------------------------------

const JudgeDescriptor ContextRecallJudge::kDescriptor{
    "context_recall",
    JudgeKind::kRetrieval,
    "context_recall",
    0.0,
    1.0,
    kUnitIntervalBuckets,
    {},
    CostClass::kCpuMicroseconds,
    "share of the reference answer's claims the retrieved contexts support (RAGAS context "
    "recall, claim by claim, without a model)"};

std::unique_ptr<Judge> ContextRecallJudge::create(const JudgeOptionValues&) {
  return std::make_unique<ContextRecallJudge>();
}

Verdict ContextRecallJudge::judge(const Event& e) const {
  if (!e.reference || e.reference->find_first_not_of(" \t\r\n") == std::string::npos)
    return Verdict::fail(Outcome::kNoReference);
  std::vector<std::string_view> texts;
  for (const auto& c : e.contexts)
    if (!c.text.empty()) texts.push_back(c.text);
  if (texts.empty()) return Verdict::fail(Outcome::kNoContext);
  const auto d = claimSupport(e.question, *e.reference, texts);
  if (d.empty || d.abstained || d.claims == 0)
    return Verdict::fail(Outcome::kEmptyInput, "the reference has no claim beyond the question");
  const auto found = static_cast<std::size_t>(std::count_if(
      d.claim_scores.begin(), d.claim_scores.end(), [](double s) { return s >= kFound; }));
  std::string evidence = std::to_string(found) + " of " + std::to_string(d.claims) +
                         " reference claims found in the contexts";
  if (d.least_score < kFound) {
    char score[16];
    std::snprintf(score, sizeof score, "%.2f", d.least_score);
    evidence += std::string("; least found (") + score + "): \"" + d.least_claim + "\"";
    if (!d.unsupported.empty()) {
      evidence += "; missing:";
      for (const auto& t : d.unsupported) evidence += " " + t;
    }
  }
  return Verdict::ok(static_cast<double>(found) / static_cast<double>(d.claims),
                     std::move(evidence));
}

}  // namespace assay
