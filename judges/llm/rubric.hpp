#pragma once
/// Rubrics for pointwise LLM judging: one criterion per call, named score levels described in
/// words, optionally one few-shot example per level. Built-in rubrics (scale 1–4) exist for
/// `faithfulness`, `answer_relevancy`, `completeness` and `context_relevance`; config may
/// override any level's wording or add examples.
///
/// Design sources: G-Eval (Liu et al., EMNLP 2023: criteria and steps spelled out, small integer
/// scales), Prometheus (Kim et al., ICLR 2024: a description per score level), RAGAS (Es et al.,
/// EACL 2024 demo: faithfulness = claims supported by the contexts; answer relevancy; context
/// relevance). LLM judges favour long answers (verbosity bias, Zheng et al., NeurIPS 2023), so the
/// top level of the answer criteria requires a concise answer with no unrequested content.

#include <string>
#include <string_view>
#include <vector>

namespace assay::llm {

struct RubricLevel {
  int score;
  std::string name;         ///< e.g. "fully supported"
  std::string description;  ///< what an answer at this level looks like, in words
};

struct FewShotExample {
  std::string question;
  std::vector<std::string> contexts;
  std::string answer;
  int score;
  std::string justification;
};

struct Rubric {
  std::string criterion;  ///< metric label, e.g. "faithfulness"
  std::string task;       ///< what the judge evaluates, one paragraph
  bool needs_contexts = false;
  bool needs_question = true;
  std::vector<RubricLevel> levels;  ///< ascending scores, contiguous
  std::vector<FewShotExample> examples;

  int minScore() const { return levels.front().score; }
  int maxScore() const { return levels.back().score; }
};

/// The built-in rubric of `criterion`, or nullptr when there is none.
const Rubric* builtinRubric(std::string_view criterion);

/// Names of the built-in criteria, for error messages.
std::vector<std::string> builtinCriteria();

}  // namespace assay::llm
