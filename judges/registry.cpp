#include "judges/registry.hpp"

#include "judges/bleu.hpp"
#include "judges/checks.hpp"
#include "judges/context_overlap.hpp"
#include "judges/json_valid.hpp"
#include "judges/retrieval.hpp"
#include "judges/rouge_l.hpp"
#include "judges/token_f1.hpp"

namespace assay {
namespace {

template <typename J>
constexpr JudgeFactory entry() {
  return JudgeFactory{&J::kDescriptor, &J::create};
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
    // lexical, against the reference
    entry<RougeLJudge>(),
    entry<BleuJudge>(),
    entry<TokenF1Judge>(),
    // retrieval, against relevant_context_ids
    entry<HitRateJudge>(),
    entry<MrrJudge>(),
    entry<NdcgJudge>(),
    // reference-free lexical
    entry<ContextOverlapJudge>(),
    entry<QuestionOverlapJudge>(),
};

}  // namespace

std::span<const JudgeFactory> judgeRegistry() { return kJudges; }

const JudgeFactory* findJudgeFactory(JudgeKind kind, std::string_view type) {
  for (const auto& f : kJudges)
    if (f.descriptor->kind == kind && f.descriptor->type == type) return &f;
  return nullptr;
}

}  // namespace assay
