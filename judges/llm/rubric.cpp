#include "judges/llm/rubric.hpp"

#include <array>

namespace assay::llm {
namespace {

const std::array<Rubric, 4>& rubrics() {
  static const std::array<Rubric, 4> kRubrics = {{
      {"faithfulness",
       "Judge whether every claim in the ANSWER is supported by the CONTEXTS. Use only the "
       "contexts, not your own knowledge: a true statement that the contexts do not support is "
       "unsupported. Numbers, dates, names and quantities must match the contexts exactly.",
       true,
       true,
       {{1, "unsupported",
         "The main claim of the answer is absent from or contradicted by the contexts."},
        {2, "partly supported",
         "Some claims are supported, but at least one important claim (a figure, a date, a "
         "name, a conclusion) is unsupported or contradicted."},
        {3, "mostly supported",
         "All important claims are supported; a minor detail is unsupported or goes beyond "
         "the contexts."},
        {4, "fully supported",
         "Every claim is supported by the contexts, including every number, date and name. An "
         "answer that says the contexts do not contain the information, when they do not, is "
         "fully supported."}},
       {}},
      {"answer_relevancy",
       "Judge whether the ANSWER addresses the QUESTION that was asked: directly, completely "
       "enough to be useful, and without unrequested content. Do not judge factual accuracy.",
       false,
       true,
       {{1, "irrelevant", "The answer does not address the question, or answers another one."},
        {2, "partly relevant",
         "The answer touches the question but misses its main point or is mostly about "
         "something else."},
        {3, "relevant but padded",
         "The answer addresses the question, but adds unrequested content, repetition or "
         "hedging that a user would have to skip."},
        {4, "relevant and concise",
         "The answer addresses exactly the question asked, concisely, with no unrequested "
         "content. Length is not a merit: a longer answer never scores higher for being "
         "longer."}},
       {}},
      {"completeness",
       "Judge whether the ANSWER covers every part of the QUESTION, using the CONTEXTS to know "
       "what a complete answer contains. Do not reward detail the question did not ask for.",
       true,
       true,
       {{1, "incomplete", "The answer leaves the main part of the question unanswered."},
        {2, "partial",
         "The answer covers some parts of the question and misses at least one important part."},
        {3, "nearly complete",
         "Every important part is covered; a minor part or qualification is missing."},
        {4, "complete and concise",
         "Every part of the question is answered, concisely, with no unrequested content."}},
       {}},
      {"context_relevance",
       "Judge whether the CONTEXTS retrieved for the QUESTION contain the information needed to "
       "answer it. Do not judge the answer.",
       true,
       true,
       {{1, "irrelevant", "No context is about the question."},
        {2, "related",
         "Some contexts are about the topic, but the information needed to answer is missing."},
        {3, "partly sufficient",
         "The contexts contain part of the needed information; some of it is missing or "
         "buried in irrelevant text."},
        {4, "sufficient",
         "The contexts contain all the information needed to answer the question."}},
       {}},
  }};
  return kRubrics;
}

}  // namespace

const Rubric* builtinRubric(std::string_view criterion) {
  for (const auto& r : rubrics())
    if (r.criterion == criterion) return &r;
  return nullptr;
}

std::vector<std::string> builtinCriteria() {
  std::vector<std::string> out;
  for (const auto& r : rubrics()) out.push_back(r.criterion);
  return out;
}

}  // namespace assay::llm
