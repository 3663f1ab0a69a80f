#pragma once
/// The series of the LLM judges and of their budget (docs/metrics.md), each declared once here
/// and registered when the first LLM judge is built: a configuration without LLM judges
/// exports none of them.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

namespace assay::llm {

/// Tokens, cost and call accounting of every LLM judge.
struct LlmStats {
  explicit LlmStats(prometheus::Registry& registry);

  /// One judge's children, held by the judge (the hot path never looks a family up). Each
  /// also carries judge_version (JudgeContext::version) when the judge has one.
  struct Judge {
    /// assay_judge_tokens_total{judge,model,direction}: input (neither cached nor written),
    /// cached_input, cache_write, output (not reasoning), reasoning (TokenUsage::Classes).
    prometheus::Counter *tokens_in, *tokens_cached, *tokens_write, *tokens_out, *tokens_reasoning;
    prometheus::Counter* cost;           ///< assay_judge_cost_euros_total{judge,model}, euros
    prometheus::Counter* usage_missing;  ///< assay_judge_usage_missing_total{judge}
    prometheus::Counter* self_judging;   ///< assay_judge_self_judging_total{judge}
    /// assay_judge_stored_verdicts_total{judge}: verdicts of redelivered events re-emitted
    /// from the verdict store (no call, no charge; their outcome is counted in runs_total too).
    prometheus::Counter* stored;
    /// assay_judge_breaker_holds_total{judge,result}: calls an open circuit breaker held
    /// (limits.when_full: block), by how their hold ended: released (the breaker let them
    /// through), gave_up (breaker_max_hold_ms passed: provider_error).
    prometheus::Counter *holds_released, *holds_gave_up;
    prometheus::Gauge* held;  ///< assay_judge_breaker_held{judge}: calls held now
  };
  Judge forJudge(const std::string& judge, const std::string& version, const std::string& model);
  /// A `batch: true` judge's batch series.
  struct Batch {
    /// assay_judge_batches_total{judge,status}: submitted, completed (results settled),
    /// expired (the provider's window passed: the unanswered requests released), failed
    /// (refused at submission, or failed at the provider).
    prometheus::Counter *submitted, *completed, *expired, *failed;
    prometheus::Histogram* requests;  ///< assay_judge_batch_requests{judge}: requests a batch
    prometheus::Histogram* latency;  ///< assay_judge_batch_latency_seconds{judge}: submit → results
    /// assay_judge_batch_saved_euros_total{judge}: the synchronous price of the settled calls
    /// minus what they cost at the batch price, euros.
    prometheus::Counter* saved;
  };
  Batch forBatch(const std::string& judge, const std::string& version);

  prometheus::Family<prometheus::Counter>& tokens;
  prometheus::Family<prometheus::Counter>& cost;
  prometheus::Family<prometheus::Counter>& usage_missing;
  prometheus::Family<prometheus::Counter>& self_judging;
  prometheus::Family<prometheus::Counter>& stored;
  prometheus::Family<prometheus::Counter>& breaker_holds;
  prometheus::Family<prometheus::Gauge>& breaker_held;
  prometheus::Family<prometheus::Counter>& batches;
  prometheus::Family<prometheus::Histogram>& batch_requests;
  prometheus::Family<prometheus::Histogram>& batch_latency;
  prometheus::Family<prometheus::Counter>& batch_saved;
  /// assay_budget_store_errors_total: calls not made because the store did not answer.
  prometheus::Counter& store_errors;
  /// assay_budget_verdicts_evicted_total: stored verdicts the memory store dropped early
  /// (MemoryBudgetStore::kMaxVerdicts).
  prometheus::Counter& verdicts_evicted;
  /// assay_budget_settled_ids_evicted_total: settled reservation ids it dropped early
  /// (MemoryBudgetStore::kMaxSettled).
  prometheus::Counter& settled_evicted;
};

/// The budget gauges of every scope ("global", "judge:<name>").
struct BudgetStats {
  explicit BudgetStats(prometheus::Registry& registry);

  struct Scope {
    prometheus::Gauge* spent;      ///< assay_budget_spent_euros{scope}, euros today
    prometheus::Gauge* limit;      ///< assay_budget_limit_euros{scope}, the daily cap
    prometheus::Gauge* exhausted;  ///< assay_budget_exhausted{scope}, 0/1
    /// assay_budget_projected_daily_euros{scope}: euros at the end of the day (Projection)
    prometheus::Gauge* projected;
  };
  Scope forScope(const std::string& scope);

  prometheus::Family<prometheus::Gauge>& spent;
  prometheus::Family<prometheus::Gauge>& limit;
  prometheus::Family<prometheus::Gauge>& exhausted;
  prometheus::Family<prometheus::Gauge>& projected;
};

}  // namespace assay::llm
