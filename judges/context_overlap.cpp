#include "judges/context_overlap.hpp"

#include <xxhash.h>

#include <cstdint>

#include "judges/abstention.hpp"
#include "judges/token_ids.hpp"
#include "judges/tokenizer.hpp"

namespace assay {
namespace {

constexpr OptionSpec kContextOverlapOptions[] = {
    {"number_weight", OptionType::kNumber,
     "weight of numbers and dates relative to other content words, 1..100; default 4", true, "4"},
    {"name_weight", OptionType::kNumber,
     "weight of names (capitalised words inside a sentence), 1..100; default 1", true, "1"},
};

// lightStem without a copy: a prefix of `t`, or (for "-ies" → "-y") the stem written to `buf`.
std::string_view stemView(std::string_view t, std::string& buf) {
  if (t.size() <= 4 || codepointCount(t) <= 4) return t;
  // The first of -ies -ing -ed -es -s -ly that ends `t` and leaves 3 bytes or more.
  const std::size_t n = t.size();
  auto ends = [&](std::string_view suffix) {
    return n >= suffix.size() + 3 && t.substr(n - suffix.size()) == suffix;
  };
  std::size_t cut = 0;
  bool ies = false;
  switch (t.back()) {
    case 's':
      if (ends("ies")) {
        cut = 3;
        ies = true;
      } else if (ends("es")) {
        cut = 2;
      } else if (t[n - 2] != 's') {  // "class", "process" keep their s
        cut = n >= 4 ? 1 : 0;
      }
      break;
    case 'g':
      if (ends("ing")) cut = 3;
      break;
    case 'd':
      if (ends("ed")) cut = 2;
      break;
    case 'y':
      if (ends("ly")) cut = 2;
      break;
    default:
      break;
  }
  std::string_view stem = t.substr(0, n - cut);
  if (ies) {  // "studies" → "study"
    buf.assign(stem);
    buf.push_back('y');
    return buf;
  }
  // A final "e" goes too, so "expire", "expires" and "expired" meet at "expir".
  if (stem.size() > 4 && stem.back() == 'e') stem.remove_suffix(1);
  return stem;
}

// The stem of token i of `w` with its hash (the token's own when the stem is the token).
std::pair<std::string_view, std::uint64_t> stemOf(const Words& w, std::size_t i, std::string& buf) {
  const std::string_view t = w[i];
  const std::string_view stem = stemView(t, buf);
  if (stem.size() == t.size() && stem.data() == t.data()) return {stem, w.hashes[i]};
  return {stem, XXH3_64bits(stem.data(), stem.size())};
}

// Appends the stems of every token of `tokens` to `stems`.
void pushStems(const Words& tokens, Words& stems) {
  thread_local std::string buf;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto [stem, hash] = stemOf(tokens, i, buf);
    stems.push(stem, hash);
  }
}

// The distinct entries of `stems` as a set (TokenIds; views into `stems`).
void internAll(const Words& stems, TokenIds& set) {
  set.reset(stems.size());
  for (std::size_t i = 0; i < stems.size(); ++i) set.intern(stems.hashes[i], stems[i]);
}

}  // namespace

std::string lightStem(std::string_view t) {
  std::string buf;
  return std::string(stemView(t, buf));
}

OverlapDetail contextOverlap(std::string_view answer, const std::vector<std::string_view>& contexts,
                             const ContextOverlapOptions& weights) {
  Words& context_tokens = scratchWords(1);
  for (const auto c : contexts) tokenizeInto(c, context_tokens);
  Words& stems = scratchWords(2);
  pushStems(context_tokens, stems);
  thread_local TokenIds supported;
  internAll(stems, supported);
  Words& words = scratchWords(0);
  tokenizeInto(answer, words, /*skip_citation_markers=*/true);
  thread_local std::string buf;
  OverlapDetail d;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::uint8_t f = words.flags[i];
    const bool cjk = (f & Words::kCjk) != 0;
    if (!cjk && isStopword(words.hashes[i], words[i])) continue;
    const bool numeric = (f & Words::kNumeric) != 0;
    const bool name =
        !numeric && (f & Words::kCapitalized) != 0 && (f & Words::kSentenceStart) == 0;
    const bool specific = numeric || name;
    const double w = numeric ? weights.number_weight : name ? weights.name_weight : 1.0;
    d.total_weight += w;
    const auto [stem, hash] = stemOf(words, i, buf);
    if (supported.find(hash, stem) != TokenIds::kAbsent) {
      d.supported_weight += w;
    } else if (specific && d.unsupported_specific.size() < 5) {
      d.unsupported_specific.emplace_back(words[i]);
    }
  }
  d.score = d.total_weight > 0 ? d.supported_weight / d.total_weight : 0.0;
  return d;
}

const JudgeDescriptor ContextOverlapJudge::kDescriptor{
    "context_overlap",
    JudgeKind::kLexical,
    "faithfulness",
    0.0,
    1.0,
    kUnitIntervalBuckets,
    kContextOverlapOptions,
    CostClass::kCpuMicroseconds,
    "faithfulness proxy: weighted share of the answer's content words found in the contexts",
    kFaithfulnessOutcomes,
    "abstentions-1"};

std::unique_ptr<Judge> ContextOverlapJudge::create(const JudgeOptionValues& values) {
  ContextOverlapOptions o;
  o.number_weight = values.getNumber("number_weight", o.number_weight);
  o.name_weight = values.getNumber("name_weight", o.name_weight);
  for (auto [key, w] :
       {std::pair{"number_weight", o.number_weight}, {"name_weight", o.name_weight}})
    if (!(w >= 1.0 && w <= 100.0)) throw OptionError(key, "must be between 1 and 100");
  return std::make_unique<ContextOverlapJudge>(o);
}

Verdict ContextOverlapJudge::judge(const Event& e) const {
  thread_local std::vector<std::string_view> texts;
  texts.clear();
  for (const auto& c : e.contexts)
    if (!c.text.empty()) texts.emplace_back(c.text);
  if (texts.empty()) return Verdict::fail(Outcome::kNoContext);
  if (answerAbstains(e.answer))  // judges/abstention.hpp: it asserts nothing
    return Verdict::fail(Outcome::kAbstained, "the answer abstains");
  const auto d = contextOverlap(e.answer, texts, options_);
  if (d.total_weight == 0) return Verdict::fail(Outcome::kEmptyInput, "no content words");
  std::string evidence;
  if (!d.unsupported_specific.empty()) {
    evidence = "not in any context:";
    for (const auto& t : d.unsupported_specific) evidence += " " + t;
  }
  return Verdict::ok(d.score, std::move(evidence));
}

const JudgeDescriptor QuestionOverlapJudge::kDescriptor{
    "question_overlap",
    JudgeKind::kLexical,
    "answer_relevancy",
    0.0,
    1.0,
    kUnitIntervalBuckets,
    {},
    CostClass::kCpuMicroseconds,
    "answer-relevancy proxy: share of the question's content words the answer repeats"};

std::unique_ptr<Judge> QuestionOverlapJudge::create(const JudgeOptionValues&) {
  return std::make_unique<QuestionOverlapJudge>();
}

Verdict QuestionOverlapJudge::judge(const Event& e) const {
  Words& question = scratchWords(0);
  tokenizeInto(e.question, question);
  thread_local Words question_stems;
  question_stems.clear();
  thread_local std::string buf;
  for (std::size_t i = 0; i < question.size(); ++i)
    if ((question.flags[i] & Words::kCjk) != 0 || !isStopword(question.hashes[i], question[i]))
      question_stems.push(stemView(question[i], buf));
  thread_local TokenIds q;
  internAll(question_stems, q);
  if (q.size() == 0) return Verdict::fail(Outcome::kEmptyInput, "question has no content words");
  Words& answer_tokens = scratchWords(1);
  tokenizeInto(e.answer, answer_tokens);
  Words& answer_stems = scratchWords(2);
  pushStems(answer_tokens, answer_stems);
  thread_local TokenIds answer;
  internAll(answer_stems, answer);
  // Each distinct question stem once: where its id first appears in question_stems.
  std::size_t hit = 0;
  std::uint32_t next_id = 0;
  for (std::size_t i = 0; i < question_stems.size(); ++i) {
    if (q.find(question_stems.hashes[i], question_stems[i]) != next_id) continue;
    ++next_id;
    hit += answer.find(question_stems.hashes[i], question_stems[i]) != TokenIds::kAbsent;
  }
  return Verdict::ok(static_cast<double>(hit) / static_cast<double>(q.size()));
}

}  // namespace assay
