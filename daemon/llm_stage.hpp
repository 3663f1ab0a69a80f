#pragma once
/// The LLM stage of the pipeline: builds every `kind: llm` judge (HTTP clients, the budget
/// store, prices, API keys from the environment), runs them asynchronously on a judged event
/// after its cheap judges, and exports their tokens, cost and budget series:
///   assay_judge_tokens_total{judge,model,direction}, assay_judge_cost_euros_total{judge,model},
///   assay_judge_usage_missing_total{judge}, assay_judge_self_judging_total{judge},
///   assay_budget_spent_euros / _limit_euros / _exhausted / _projected_daily_euros{scope}.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "judges/event.hpp"
#include "judges/verdict.hpp"
#include "sinks/metrics.hpp"

namespace assay {

class LlmStage {
 public:
  /// `judge_index[i]` is the position of config.judges[i] in `metrics.judge`. Throws
  /// ConfigurationError (missing API key variable) or std::runtime_error (ca_file).
  LlmStage(const Config& config, Metrics& metrics);
  ~LlmStage();

  bool enabled() const;
  /// Whether the budget store answers (for /readyz); true without LLM judges.
  bool ready() const;
  /// Config indexes of the LLM judges, in config order.
  const std::vector<std::size_t>& judges() const;

  /// Starts judge `config_index` on `event`; `done` runs once with the verdict (on another
  /// thread, or at once for outcomes decided before a call). `latency_s` is the call's wall time.
  void judge(std::size_t config_index, const Event& event,
             std::function<void(Verdict verdict, double latency_s)> done);

  /// Refreshes the budget gauges and logs alerts; cheap, called every few seconds.
  void refreshBudget();
  /// Calls in flight or waiting, over every LLM judge.
  int pending() const;
  /// Stops the HTTP threads: calls still running are abandoned and their callbacks never run
  /// (their events stay uncommitted and are judged again after a restart). Call it before the
  /// sinks go away; judge() must not be called afterwards.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace assay
