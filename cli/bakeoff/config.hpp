#pragma once
/// The bakeoff file (`assay bakeoff --config FILE`, docs/bakeoff.md): inputs, arms, criteria,
/// judges, passes and seed, read and checked in one go. Every problem is collected with its
/// FILE:LINE:COLUMN and key path (config/loader.hpp's ConfigError), as assayd's configuration.
///
///   inputs:   {file: EVENTS.jsonl, limit: 10}   assay events: id, question, contexts
///             or a list of {id, question, contexts}
///   criteria: [{name, description, weight}]     default: relevance 30, completeness 25,
///                                               clarity 20, accuracy 15, format 10
///   arms:     [{name, recorded: FILE [, field: /output] [, model]}        recorded outputs
///             | {name, provider, endpoint, model, api_key_env, system, template, …}  live
///             | {name, <step defaults>, steps: [{system, template, …}, …]}]  workflow
///   judges:   [{name, provider, endpoint, model, api_key_env, max_tokens, timeout}]  2 or 3
///   passes:   1 | 2 (the second with every order reversed)
///   exclude_biased: true leaves the judges the position audit flags out of the consensus
///             (default false: they stay in; either way the report gives the other view too)
///   seed:     the label orders' random seed (default: drawn, printed in the report)

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/bakeoff/analysis.hpp"
#include "config/loader.hpp"
#include "core/event.hpp"
#include "judges/llm/provider.hpp"

namespace assay::bakeoff {

/// One endpoint and model: an arm's generation step or a judge.
struct Endpoint {
  llm::Provider provider = llm::Provider::kOpenAi;
  std::string endpoint;     ///< e.g. https://api.openai.com/v1
  std::string model;        ///< priced by the price table (unpriced: an error)
  std::string api_key_env;  ///< the environment variable holding the key ("" = no key)
  std::string ca_file;      ///< PEM bundle of a private CA ("" = the system store)
  int max_tokens = 800;     ///< reply cap sent to the API, tokens
  double timeout_s = 60;    ///< per attempt, seconds
  std::string where;        ///< "FILE:LINE:COLUMN: judges[1]" (for messages)
};

/// One call of a live arm. The template's placeholders: {{question}}, {{contexts}} (the
/// contexts' texts, numbered, one per paragraph), {{id}}, and {{previous}} (the previous step's
/// output; "" for the first step).
struct Step {
  Endpoint at;
  std::string system;  ///< system prompt ("" = none)
  std::string prompt;  ///< the user message template
  double temperature = 0;
};

struct Arm {
  std::string name;
  /// Recorded outputs: JSON Lines, one object per input with its id (at /id) and its output
  /// (at `recorded_field`, a JSON Pointer). Empty for a live arm.
  std::string recorded_file;
  std::string recorded_field = "/output";
  std::string model;        ///< the generator's model (recorded: optional, for the family warning)
  std::vector<Step> steps;  ///< live: one step, or a workflow of several
  bool live() const { return !steps.empty(); }
};

struct Judge {
  std::string name;
  Endpoint at;
};

struct BakeoffConfig {
  std::string file;           ///< the file read (messages)
  std::string name;           ///< shown in the report ("" = the file's stem)
  std::vector<Event> inputs;  ///< id, question, contexts (answer unused)
  std::string inputs_file;    ///< "" when inline
  std::vector<Criterion> criteria;
  std::vector<Arm> arms;
  std::vector<Judge> judges;
  int passes = 1;
  bool exclude_biased = false;
  std::optional<std::uint64_t> seed;
  int concurrency = 4;  ///< calls in flight at once (1–32)
};

struct BakeoffLoad {
  BakeoffConfig config;
  std::vector<ConfigError> errors;    ///< empty = valid
  std::vector<ConfigError> warnings;  ///< e.g. a judge of an arm's model family
  bool ok() const { return errors.empty(); }
};

/// Reads and checks `path`: YAML syntax, unknown keys (with "did you mean"), types, the sizes
/// (sizeProblem), the criteria (criteriaProblem), every recorded file (readable, one output per
/// input id, the error naming the file, line and id), the inputs file (the first `limit` lines,
/// each an object with a string id and question), endpoints (an http(s):// URL), providers,
/// placeholders, and judges sharing a generator's model family (a warning). Relative paths are
/// relative to the file's directory. Never throws.
BakeoffLoad loadBakeoff(const std::string& path);
/// Same from text; `file` is used in messages and `base_dir` resolves relative paths.
BakeoffLoad loadBakeoffString(const std::string& yaml, const std::string& file,
                              const std::string& base_dir);

/// `tmpl` with {{question}}, {{contexts}}, {{id}} and {{previous}} replaced (once, left to
/// right: a value that holds "{{question}}" is not expanded again).
std::string render(const std::string& tmpl, const Event& input, const std::string& previous);

/// The recorded outputs of `arm` for `inputs`, in the inputs' order, or throws
/// std::runtime_error naming the file and line (unreadable, not JSON, no string at the field, an
/// id not among the inputs is ignored, an input without an output is an error).
std::vector<std::string> readRecorded(const Arm& arm, const std::vector<Event>& inputs);

}  // namespace assay::bakeoff
