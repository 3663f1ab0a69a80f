#include "judges/context_overlap.hpp"

#include <unordered_set>

#include "judges/tokenizer.hpp"

namespace assay {
namespace {

constexpr OptionSpec kContextOverlapOptions[] = {
    {"number_weight", OptionType::kNumber,
     "weight of numbers and dates relative to other content words, 1..100; default 4"},
    {"name_weight", OptionType::kNumber,
     "weight of names (capitalised words inside a sentence), 1..100; default 1"},
};

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::unordered_set<std::string> stemSet(std::string_view text) {
  std::unordered_set<std::string> out;
  for (const auto& t : tokenize(text)) out.insert(lightStem(t));
  return out;
}

}  // namespace

std::string lightStem(std::string_view t) {
  if (codepointCount(t) <= 4) return std::string(t);
  std::string_view stem = t;
  for (std::string_view suffix : {"ies", "ing", "ed", "es", "s", "ly"}) {
    if (endsWith(t, suffix) && t.size() - suffix.size() >= 3) {
      if (suffix == "s" && endsWith(t, "ss")) break;  // "class", "process"
      stem = t.substr(0, t.size() - suffix.size());
      if (suffix == "ies") return std::string(stem) + "y";  // "studies" → "study"
      break;
    }
  }
  // A final "e" goes too, so "expire", "expires" and "expired" meet at "expir".
  if (stem.size() > 4 && stem.back() == 'e') stem.remove_suffix(1);
  return std::string(stem);
}

OverlapDetail contextOverlap(std::string_view answer, const std::vector<std::string>& contexts,
                             const ContextOverlapOptions& weights) {
  std::unordered_set<std::string> supported;
  for (const auto& c : contexts) {
    supported.merge(stemSet(c));  // moves the nodes, no string copies
  }
  OverlapDetail d;
  for (const auto& tok : tokenizeDetailed(stripCitationMarkers(answer))) {
    if (!tok.cjk && isStopword(tok.text)) continue;
    const bool name = !tok.numeric && tok.capitalized && !tok.sentence_start;
    const bool specific = tok.numeric || name;
    const double w = tok.numeric ? weights.number_weight : name ? weights.name_weight : 1.0;
    d.total_weight += w;
    if (supported.count(lightStem(tok.text))) {
      d.supported_weight += w;
    } else if (specific && d.unsupported_specific.size() < 5) {
      d.unsupported_specific.push_back(tok.text);
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
    "faithfulness proxy: weighted share of the answer's content words found in the contexts"};

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
  std::vector<std::string> texts;
  for (const auto& c : e.contexts)
    if (!c.text.empty()) texts.push_back(c.text);
  if (texts.empty()) return Verdict::fail(Outcome::kNoContext);
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
  std::unordered_set<std::string> q;
  for (const auto& t : tokenizeDetailed(e.question))
    if (t.cjk || !isStopword(t.text)) q.insert(lightStem(t.text));
  if (q.empty()) return Verdict::fail(Outcome::kEmptyInput, "question has no content words");
  const auto answer = stemSet(e.answer);
  std::size_t hit = 0;
  for (const auto& t : q) hit += answer.count(t);
  return Verdict::ok(static_cast<double>(hit) / static_cast<double>(q.size()));
}

}  // namespace assay
