#pragma once
/// `assay estimate`: the projected LLM-judge cost per day and per month of a traffic rate, a
/// sample rate and a judge list (docs/configuration.md, "Money"). Same arithmetic as the daemon's
/// ledger (judges/llm/pricing.hpp): a judge with `rate` r makes requests/day × sample_rate × r
/// calls a day, each costing its tokens × the model's price per million tokens; EUR = USD ×
/// usd_to_eur; a month is 30 days. No prompt-cache discount is assumed (the projection errs high).
///
/// Example (issue 3): 2,000 gpt-4o calls a day at 800 input / 200 output tokens → $0.00400 a
/// call, $8.00 a day, $240.00 = €220.80 a month at 0.92.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "judges/llm/pricing.hpp"

namespace assay {

inline constexpr int kEstimateDaysPerMonth = 30;

/// One `--judge MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]`, or one `kind: llm` judge of
/// `--config`.
struct EstimateJudge {
  std::string model;
  double rate = 1.0;                 ///< share of sampled events the judge sees, (0, 1]
  std::int64_t input_tokens = 800;   ///< prompt tokens per call
  std::int64_t output_tokens = 200;  ///< completion tokens per call (config: its max_tokens)
  std::string name;                  ///< the configured judge's name; empty for --judge
  double daily_limit_eur = 0;        ///< its own cap (config daily_limit_eur); 0 = none
  bool run_if = false;               ///< runs only when its run_if holds: fewer calls
  bool gated = false;                ///< a --judge: the escalation share applies to it
  bool batch = false;  ///< config batch: true: priced at the batch price (llm::batchPrice)
  /// The share of its events the judge would call (--events: the rest lack an input the
  /// rubric needs, or do not fit max_input_tokens), [0, 1].
  double called_share = 1.0;
};

struct EstimateOptions {
  double requests_per_second = 0;  ///< as given; 0 when --requests-per-day was
  double requests_per_day = 0;     ///< the traffic, requests per day (≥ 0)
  double sample_rate = 0;          ///< share of requests sampled, [0, 1]
  std::vector<EstimateJudge> judges;
  double usd_to_eur = 0.92;  ///< EUR per USD, > 0
  /// `--price MODEL=IN/CACHED/OUT` (or IN/OUT, cached = input), USD per million tokens, in
  /// command-line order; applied over the built-in table.
  std::vector<std::pair<std::string, llm::ModelPrice>> prices;
  std::size_t config_prices = 0;  ///< the first ones came from the config's budget.prices
  /// `--config ASSAYD.yaml`: the file the judges, sample rate, EUR rate, prices and caps came
  /// from (each unless given as a flag); empty without it.
  std::string config_path;
  double daily_limit_eur = 0;  ///< the config's budget.daily_limit_eur (0 = none known)
  /// `--escalation-share S` in (0, 1]: the share of sampled events a cascade sends on to the LLM
  /// (`assay report --cascade JUDGE --recall R` measures it). It multiplies the rate of every
  /// judge of --judge, and of every configured judge with a run_if; 1 = no cascade.
  double escalation_share = 1.0;
  std::vector<std::string> notes;  ///< what the estimate does not model (sampling rules, run_if)
  /// The config's budget.tenants / budget.apps caps ("*": every other one), and, from --events,
  /// each tenant's (app's) share of the events ("none" for events without one), in [0, 1].
  std::vector<std::pair<std::string, double>> tenant_caps, app_caps;
  std::map<std::string, double> tenant_shares, app_shares;
  std::string events_path;  ///< where the shares come from ("" = no --events)
};

/// A bad argument or an unpriced model; the message is for the user, the exit code 2.
class EstimateError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Parses the arguments after `assay estimate`. Throws EstimateError naming the bad argument.
/// `--config FILE` loads an assayd configuration (config/loader.hpp; its errors, FILE:LINE:COL,
/// are the message): its `kind: llm` judges (model, rate, max_tokens as the output tokens,
/// `--input-tokens` as the input, default 800), sampling.rate, budget.usd_to_eur,
/// budget.prices and the daily caps; --judge (all the judges), --sample-rate, --usd-to-eur and
/// --price given as well take precedence.
EstimateOptions parseEstimateArgs(const std::vector<std::string>& args);

struct EstimateRow {
  EstimateJudge judge;
  std::string priced_as;          ///< the price-table entry used (the model, or its base name)
  bool price_overridden = false;  ///< priced by --price rather than the built-in table
  std::string price_source = "built-in";  ///< "built-in", "budget.prices" or "--price"
  llm::ModelPrice price;
  double calls_per_day = 0;
  double usd_per_call = 0, usd_per_day = 0, usd_per_month = 0;
  double eur_per_call = 0, eur_per_day = 0, eur_per_month = 0;
};

struct Estimate {
  EstimateOptions options;
  std::vector<EstimateRow> rows;  ///< one per judge, in the given order
  double calls_per_day = 0;       ///< totals over the judges
  double usd_per_day = 0, usd_per_month = 0;
  double eur_per_day = 0, eur_per_month = 0;
  /// The same totals with every judge at its own rate (escalation share 1): what the cascade
  /// saves is the difference.
  double eur_per_day_without_cascade = 0, eur_per_month_without_cascade = 0;
};

/// Prices every judge from `table` after applying `options.prices`. Throws EstimateError when
/// a judge's model has no price (the daemon would refuse to start that judge too).
Estimate computeEstimate(const EstimateOptions& options,
                         llm::PriceTable table = llm::PriceTable::builtin());

/// Prints the estimate as an aligned table: per judge and in total, calls per day, cost per
/// call, per day and per 30-day month in USD and EUR, then the prices used; from a config, the
/// daily caps against the projection and what is not modelled.
void printEstimate(const Estimate& estimate, std::ostream& out);

}  // namespace assay
