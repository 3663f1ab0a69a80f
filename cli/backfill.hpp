#pragma once
/// `assay backfill`: judges past traffic (docs/backfill.md). The events topic between two
/// times is read with the client library's offsets-for-times lookup by a consumer that joins
/// no group and commits nothing (the live consumer group is never touched); the configured
/// judges (or a selection) run at a chosen rate, under the same daily budget; every judgment
/// carries "backfill": true.
///
/// The estimate comes first: the events in range (from the offsets), the share sampled, then
/// per judge the calls and euros at the synchronous price and at the providers' batch price
/// (half the list price: OpenAI Batch API and Anthropic Message Batches, both 50 % off).
/// Nothing is judged without `--yes`, or `--max-cost-eur X` with an estimate within X; an
/// estimate above X is refused (exit 2). A progress bar with the rate and the time left goes to
/// standard error when it is a terminal.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace assay::cli {

struct BackfillOptions {
  std::string config_path;          ///< --config ASSAYD.yaml (required)
  std::int64_t from_ms = 0;         ///< --from: RFC 3339, or a duration back from now (7d, 12h)
  std::int64_t to_ms = 0;           ///< --to: the same; default now (when the range is planned)
  bool to_given = false;            ///< --to was given (else "now" is taken after --replay)
  std::vector<std::string> judges;  ///< --judge NAME (repeatable); empty = every configured judge
  std::optional<double> rate;       ///< --rate R in (0, 1]; default sampling.rate
  bool yes = false;                 ///< --yes: proceed after the estimate
  std::optional<double> max_cost_eur;  ///< --max-cost-eur X: proceed if the estimate ≤ X
  std::string replay_file;             ///< --replay FILE: produce it first (embedded broker demo)
  std::string output;               ///< --output FILE: judgments there, not in the config's sinks
  std::int64_t input_tokens = 800;  ///< --input-tokens N: prompt tokens per LLM call (estimate)
};

/// Parses the arguments after `assay backfill`; `now_ms` anchors durations. Throws
/// std::invalid_argument naming the bad argument.
BackfillOptions parseBackfillArgs(const std::vector<std::string>& args, std::int64_t now_ms);

/// A duration back from now ("7d", "12h", "30m", "90s", "2w") or an RFC 3339 time, as Unix
/// epoch milliseconds; nullopt when it is neither.
std::optional<std::int64_t> parseBackfillTime(const std::string& text, std::int64_t now_ms);

/// Runs `assay backfill`: 0 done (or the estimate only), 1 a run-time failure, 2 bad
/// arguments, an invalid configuration, or an estimate above --max-cost-eur.
int runBackfill(BackfillOptions o, std::ostream& out, std::ostream& err);

}  // namespace assay::cli
