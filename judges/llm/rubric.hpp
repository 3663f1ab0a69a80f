#pragma once
/// Rubrics for pointwise LLM judging: one criterion per call, named score levels described in
/// words, one rule for abstaining answers, and one few-shot example per level. Built-in rubrics
/// (scale 1–4, four examples each, written for assay) exist for `faithfulness`,
/// `answer_relevancy`, `completeness` and `context_relevance`; config may override any level's
/// wording and replace the examples (`rubric.levels`, `rubric.examples`, docs/configuration.md).
/// Any other criterion name is a custom rubric written in the configuration: its definition,
/// 2 to 10 named levels on consecutive integer scores, optional examples, and the event fields
/// it sees (`rubric.inputs`: question, contexts, answer, reference, or JSON Pointers into the
/// event message); docs/configuration.md, "Custom criteria".
///
/// Each criterion receives what it needs and no more (`needs_*`): answer relevancy does not see
/// the contexts, context relevance does not see the answer. Only faithfulness asks for the
/// answer's most important unsupported claim (`names_claim`).
///
/// Design sources: G-Eval (Liu et al., EMNLP 2023: criteria and steps spelled out, small integer
/// scales), Prometheus (Kim et al., ICLR 2024: a description per score level, feedback before
/// the score), RAGAS (Es et al., EACL 2024 demo: faithfulness = claims supported by the contexts,
/// "supported" including what can be directly inferred; answer relevancy, noncommittal answers
/// scored low; context relevance). LLM judges favour long answers (verbosity bias, Zheng et al.,
/// NeurIPS 2023): padding is answer relevancy's concern, and no criterion rewards length.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace assay::llm {

struct RubricLevel {
  int score = 0;
  std::string name;         ///< e.g. "fully supported"
  std::string description;  ///< what an answer at this level looks like, in words
};

/// A worked example shown to the judge: material of the criterion's shape and the reply expected
/// for it (written with the JSON writer, so any quote or newline stays valid JSON).
struct FewShotExample {
  std::string question;
  std::vector<std::string> contexts;  ///< passage texts in rank order (shown as ranks 1..n)
  std::string answer;
  int score = 0;  ///< within the rubric's scale
  std::string justification;
  /// The example's most important unsupported claim, quoted from its answer; nullopt = none
  /// (null in the reply). Shown only for a rubric that `names_claim`.
  std::optional<std::string> unsupported_claim{};
  std::string reference{};  ///< shown when the rubric `needs_reference`
  /// The values of the rubric's `fields`, in the same order (empty string: not given).
  std::vector<std::string> field_values{};
};

struct Rubric {
  std::string criterion;   ///< metric label, e.g. "faithfulness"
  std::string task;        ///< what the judge evaluates, one paragraph
  std::string abstention;  ///< how an answer that declines to answer ("I don't know") is scored
  bool needs_question = true;
  bool needs_contexts = false;
  bool needs_answer = true;
  /// The event's `reference` (ground-truth answer); an event without one is `no_reference`.
  bool needs_reference = false;
  /// JSON Pointers (RFC 6901) into the event message whose values the judge sees, in the
  /// material under the pointer itself as the member name ("/metadata/persona"); at most
  /// kMaxRubricFields. An event without a value at one of them is `not_applicable`.
  std::vector<std::string> fields{};
  /// Written in the configuration (no built-in rubric of this name): `task` is its definition.
  bool custom = false;
  /// The reply carries `unsupported_claim`, the answer's most important claim the contexts do
  /// not support (faithfulness only).
  bool names_claim = false;
  /// A score judged on trimmed contexts (max_input_tokens) is not this criterion's score: a
  /// claim unsupported by the contexts kept may be supported by one left out (faithfulness).
  /// Such a verdict is the outcome `contexts_trimmed` unless the judge sets `score_trimmed`.
  bool needs_every_context = false;
  std::vector<RubricLevel> levels;  ///< ascending scores, contiguous
  std::vector<FewShotExample> examples;

  int minScore() const { return levels.front().score; }
  int maxScore() const { return levels.back().score; }
};

/// At most this many JSON Pointer inputs per rubric, and levels per custom rubric.
inline constexpr std::size_t kMaxRubricFields = 8;
inline constexpr std::size_t kMinCustomLevels = 2, kMaxCustomLevels = 10;
/// Scores of a custom rubric's levels lie in [kMinLevelScore, kMaxLevelScore].
inline constexpr int kMinLevelScore = 0, kMaxLevelScore = 100;

/// The built-in rubric of `criterion`, or nullptr when there is none.
const Rubric* builtinRubric(std::string_view criterion);

/// Names of the built-in criteria, for error messages.
std::vector<std::string> builtinCriteria();

}  // namespace assay::llm
