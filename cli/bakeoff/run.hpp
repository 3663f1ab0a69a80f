#pragma once
/// Running a bakeoff (docs/bakeoff.md): the cost estimate before any call, the arms' live
/// generations, the listwise judge calls, and the analysis of their replies (analysis.hpp).
///
/// Every call goes through the same pieces as assayd's LLM judges: the provider's request and
/// reply (llm/provider.hpp), the HTTP client (llm/http_client.hpp), the retry policy with
/// Retry-After as a floor (llm/retry.hpp), the price table (llm/pricing.hpp) and the daily
/// budget ledger (llm/budget.hpp): each call reserves its worst case (prompt estimate +
/// max_tokens, priced) in the scopes "global" (budget.daily_limit_eur) and "bakeoff" (the same
/// cap, so a bakeoff's spend is visible on its own) before it starts, and settles with the
/// reported usage. With assayd's `budget.store` (`--budget-config`) a bakeoff spends from the
/// daemons' own daily budget.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/bakeoff/analysis.hpp"
#include "cli/bakeoff/config.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/budget.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/ledger.hpp"
#include "judges/llm/pricing.hpp"

namespace assay::bakeoff {

/// The listwise judge prompt of one call: the criteria with their descriptions, the rules (the
/// labels and the order carry no meaning; the material between the markers is data), the reply
/// schema, and the input with every output under its label, as one JSON object between
/// boundary markers (llm/prompt.hpp's). `outputs[position]` is shown under label(position).
llm::Prompt listwisePrompt(const Event& input, const std::vector<std::string>& outputs,
                           const std::vector<Criterion>& criteria);

/// The JSON Schema (draft-04) of a listwise reply for `arms` labels: an object with one member
/// per label, each an object with one integer 0–100 per criterion name; every member
/// required, no other member.
std::string listwiseSchema(std::size_t arms, const std::vector<Criterion>& criteria);

/// Reads a listwise reply: "" and `label_scores[position][criterion]` filled, or why not.
std::string parseListwise(const std::string& content, std::size_t arms,
                          const std::vector<Criterion>& criteria,
                          std::vector<std::vector<double>>& label_scores);

/// Token counts recorded by earlier calls (the usage history file, JSON Lines of {"t", "role",
/// "model", "prompt_tokens", "completion_tokens", and for a judge "arms": the outputs its
/// listwise reply scored}): the estimate's completion sizes.
class UsageHistory {
 public:
  /// Reads `path`; a missing file is an empty history, unreadable lines are skipped.
  static UsageHistory load(const std::string& path);
  /// The median completion tokens of `role` ("generate" or "judge") on `model`, from at least
  /// 3 records; else nullopt. With `arms` (a judge's reply scores every arm, so it grows with
  /// them): the median per arm of the records that say their arms, times `arms` (a history of
  /// 4-arm bakeoffs estimated an 8-arm one at half its size); records without it count whole.
  std::optional<std::int64_t> medianCompletion(const std::string& role, const std::string& model,
                                               std::size_t arms = 0) const;
  /// `arms`: the outputs a judge's reply scored (0: not known).
  void add(const std::string& role, const std::string& model, std::int64_t completion,
           std::size_t arms = 0);

 private:
  struct Sample {
    std::int64_t completion;
    std::size_t arms;
  };
  std::map<std::string, std::vector<Sample>> completion_;  // role + "\t" + model
};

/// The default history file: $XDG_STATE_HOME/assay/bakeoff_usage.jsonl, else
/// ~/.local/state/assay/bakeoff_usage.jsonl.
std::string defaultHistoryPath();

struct EstimateLine {
  std::string role;  ///< "generate" (an arm's step) or "judge"
  std::string who;   ///< the arm (and step) or judge name
  std::string model;
  std::size_t calls = 0;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;  ///< summed over the calls
  bool completion_from_history = false;  ///< else max_tokens, the most a call can cost
  double usd = 0;
};

struct Estimate {
  std::vector<EstimateLine> lines;
  std::size_t calls = 0;
  double usd = 0, eur = 0;
};

/// The cost before any call: every live arm's steps × inputs, and judges × inputs × passes.
/// Prompt tokens from the prompts themselves (llm::estimateTokens: the inputs, templates and
/// recorded outputs; a live output not yet generated counts as its step's completion
/// estimate); completion tokens from the history's median for that role and model, else
/// max_tokens. Throws std::runtime_error naming a model the price table does not know.
Estimate estimate(const BakeoffConfig& config, const llm::PriceTable& prices, double usd_to_eur,
                  const UsageHistory& history);

/// One call as made, for the JSON report and the usage history.
struct CallRecord {
  std::string role;  ///< "generate" or "judge"
  std::string who;   ///< arm name (and step), or judge name
  std::string model;
  std::string input_id;
  int pass = 0;
  bool ok = false;
  std::string error;  ///< when !ok: provider error, schema problem, budget refusal
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  double usd = 0, eur = 0;
  double seconds = 0;
  int attempts = 0;
  std::vector<std::size_t> order;  ///< judge calls: order[position] = arm
  /// judge calls that returned valid scores: scores[arm][criterion], already mapped back
  std::vector<std::vector<double>> scores;
};

struct RunOptions {
  BudgetOptions budget;  ///< caps, time zone, usd_to_eur, store
  llm::PriceTable prices = llm::PriceTable::builtin();
  std::uint64_t seed = 0;
  std::string history_path;  ///< "" = do not record usage
  /// Called after every finished call with (calls done, calls in all, euros spent so far).
  std::function<void(std::size_t, std::size_t, double)> progress;
};

struct RunResult {
  /// outputs[arm][input]; nullopt where a live generation failed (that input is not judged).
  std::vector<std::vector<std::optional<std::string>>> outputs;
  std::vector<Call> calls;  ///< the judge calls that returned valid scores
  std::vector<CallRecord> records;
  Analysis analysis;
  std::size_t judge_failures = 0, generation_failures = 0;
  std::vector<std::string> skipped_inputs;  ///< ids not judged (an arm had no output)
  double usd = 0, eur = 0;
};

/// The API keys of every endpoint (from their variables); throws std::runtime_error naming an
/// unset variable. Returns variable → key.
std::map<std::string, std::string> readApiKeys(const BakeoffConfig& config);

/// Runs the bakeoff: generations first (arms × inputs, each workflow's steps in order), then
/// every judge on every input and pass, `config.concurrency` calls at a time (judges run
/// concurrently). Every call is reserved, then settled or released, through `ledger` (the
/// judge's ledger path, judges/llm/ledger.hpp). A failed call is recorded and left out (never
/// a score); a judge reply that breaks the schema is asked once more.
RunResult runBakeoff(const BakeoffConfig& config, const RunOptions& options, llm::Ledger& ledger);

}  // namespace assay::bakeoff
