#include "judges/registry.hpp"

#include "judges/bleu.hpp"
#include "judges/checks.hpp"
#include "judges/claim_support.hpp"
#include "judges/context_overlap.hpp"
#include "judges/date_check.hpp"
#include "judges/json_valid.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/retrieval.hpp"
#include "judges/rouge_l.hpp"
#include "judges/token_f1.hpp"

namespace assay {
namespace {

// Judge types take (values) or (values, context) in create(), and say their criterion and
// scale through info(values) when their options decide them; the table adapts both forms.
template <typename J>
std::unique_ptr<Judge> createAdapter(const JudgeOptionValues& values, const JudgeContext& ctx) {
  if constexpr (requires { J::create(values, ctx); })
    return J::create(values, ctx);
  else
    return J::create(values);
}

template <typename J>
JudgeInfo infoAdapter(const JudgeOptionValues& values) {
  if constexpr (requires { J::info(values); })
    return J::info(values);
  else
    return descriptorInfo(J::kDescriptor);
}

template <typename J>
constexpr JudgeFactory entry() {
  return JudgeFactory{&J::kDescriptor, &createAdapter<J>, &infoAdapter<J>};
}

// Every judge type, in the order cheap → expensive. Add a new judge here (docs/adding-a-judge.md).
const JudgeFactory kJudges[] = {
    // checks
    entry<AnswerNonemptyJudge>(),
    entry<JsonValidJudge>(),
    entry<CitesSourceJudge>(),
    entry<ContextCountJudge>(),
    entry<AnswerLengthJudge>(),
    entry<RefusalJudge>(),
    entry<DateValidJudge>(),
    // lexical, against the reference
    entry<RougeLJudge>(),
    entry<BleuJudge>(),
    entry<TokenF1Judge>(),
    // retrieval, against relevant_context_ids
    entry<HitRateJudge>(),
    entry<MrrJudge>(),
    entry<NdcgJudge>(),
    // retrieval, against the reference answer's claims
    entry<ContextRecallJudge>(),
    // reference-free lexical
    entry<ContextOverlapJudge>(),
    entry<ClaimSupportJudge>(),
    entry<QuestionOverlapJudge>(),
    // LLM-as-a-judge, asynchronous (judges/llm/)
    entry<llm::LlmJudge>(),
};

}  // namespace

std::span<const JudgeFactory> judgeRegistry() { return kJudges; }

const JudgeFactory* findJudgeFactory(JudgeKind kind, std::string_view type) {
  for (const auto& f : kJudges)
    if (f.descriptor->kind == kind && f.descriptor->type == type) return &f;
  return nullptr;
}

const char* judgeTypeKey(JudgeKind kind) {
  switch (kind) {
    case JudgeKind::kCheck:
      return "check";
    case JudgeKind::kLexical:
    case JudgeKind::kRetrieval:
      return "metric";
    case JudgeKind::kLlm:
      return nullptr;
  }
  return nullptr;
}

}  // namespace assay
