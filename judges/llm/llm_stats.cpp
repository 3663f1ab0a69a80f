#include "judges/llm/llm_stats.hpp"

namespace assay::llm {
namespace {

prometheus::Family<prometheus::Counter>& counter(prometheus::Registry& r, const char* name,
                                                 const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

LlmStats::LlmStats(prometheus::Registry& r)
    : tokens(counter(r, "assay_judge_tokens_total",
                     "Tokens charged for LLM judge calls, by class: input, cached_input, "
                     "cache_write, output, reasoning")),
      cost(counter(r, "assay_judge_cost_euros_total",
                   "Cost of LLM judge calls in euros (reported usage × price × usd_to_eur)")),
      usage_missing(counter(r, "assay_judge_usage_missing_total",
                            "LLM replies without usage, charged a conservative estimate")),
      self_judging(counter(r, "assay_judge_self_judging_total",
                           "Events judged by a model of the same family as the one that answered")),
      stored(counter(r, "assay_judge_stored_verdicts_total",
                     "Verdicts of redelivered events re-emitted from the verdict store (no call, "
                     "no charge)")),
      breaker_holds(counter(r, "assay_judge_breaker_holds_total",
                            "LLM calls held by an open circuit breaker (limits.when_full: "
                            "block), by result: released, gave_up")),
      breaker_held(
          gauge(r, "assay_judge_breaker_held", "LLM calls an open circuit breaker holds now")),
      batches(counter(r, "assay_judge_batches_total",
                      "Provider batches of batch: true LLM judges, by status: submitted, "
                      "completed, expired, failed")),
      batch_requests(prometheus::BuildHistogram()
                         .Name("assay_judge_batch_requests")
                         .Help("Requests per submitted provider batch")
                         .Register(r)),
      batch_latency(prometheus::BuildHistogram()
                        .Name("assay_judge_batch_latency_seconds")
                        .Help("Seconds from a batch's submission to its results settled")
                        .Register(r)),
      batch_saved(counter(r, "assay_judge_batch_saved_euros_total",
                          "Euros saved by batch judging: the calls' synchronous price minus "
                          "their batch price")),
      store_errors(counter(r, "assay_budget_store_errors_total",
                           "LLM calls not made because the budget store did not answer (fail "
                           "closed; cheap judges go on)")
                       .Add({})),
      verdicts_evicted(counter(r, "assay_budget_verdicts_evicted_total",
                               "Stored verdicts the memory budget store dropped, oldest first, "
                               "to keep at most 100,000 (a redelivery of their event is called "
                               "and paid for again)")
                           .Add({})),
      settled_evicted(counter(r, "assay_budget_settled_ids_evicted_total",
                              "Settled reservation ids the memory budget store dropped, oldest "
                              "first, to keep at most 100,000 a day (a settlement arriving again "
                              "for one of them would be charged twice)")
                          .Add({})) {}

namespace {

/// {judge, judge_version} and `more`; no judge_version label for a judge without a version.
prometheus::Labels judgeLabels(const std::string& judge, const std::string& version,
                               prometheus::Labels more = {}) {
  more["judge"] = judge;
  if (!version.empty()) more["judge_version"] = version;
  return more;
}

}  // namespace

LlmStats::Judge LlmStats::forJudge(const std::string& judge, const std::string& version,
                                   const std::string& model) {
  const auto l = [&](prometheus::Labels more = {}) {
    return judgeLabels(judge, version, std::move(more));
  };
  const auto dir = [&](const char* d) {
    return &tokens.Add(l({{"model", model}, {"direction", d}}));
  };
  return Judge{dir("input"),
               dir("cached_input"),
               dir("cache_write"),
               dir("output"),
               dir("reasoning"),
               &cost.Add(l({{"model", model}})),
               &usage_missing.Add(l()),
               &self_judging.Add(l()),
               &stored.Add(l()),
               &breaker_holds.Add(l({{"result", "released"}})),
               &breaker_holds.Add(l({{"result", "gave_up"}})),
               &breaker_held.Add(l())};
}

LlmStats::Batch LlmStats::forBatch(const std::string& judge, const std::string& version) {
  const auto l = [&](prometheus::Labels more = {}) {
    return judgeLabels(judge, version, std::move(more));
  };
  const auto status = [&](const char* s) { return &batches.Add(l({{"status", s}})); };
  return Batch{
      status("submitted"),
      status("completed"),
      status("expired"),
      status("failed"),
      &batch_requests.Add(l(), prometheus::Histogram::BucketBoundaries{1, 10, 50, 100, 500, 1000,
                                                                       5000, 10000, 50000}),
      &batch_latency.Add(
          l(), prometheus::Histogram::BucketBoundaries{1, 10, 60, 300, 900, 1800, 3600, 4 * 3600,
                                                       12 * 3600, 24 * 3600, 48 * 3600}),
      &batch_saved.Add(l())};
}

BudgetStats::BudgetStats(prometheus::Registry& r)
    : spent(
          gauge(r, "assay_budget_spent_euros", "Euros spent today (local day of budget.timezone)")),
      limit(gauge(r, "assay_budget_limit_euros", "Daily cap in euros")),
      exhausted(gauge(r, "assay_budget_exhausted", "1 once today's cap refused a call")),
      projected(gauge(r, "assay_budget_projected_daily_euros",
                      "Euros spent by the end of the day at the last 15 minutes' pace: the shared "
                      "spend + its growth × the time left in the day")) {}

BudgetStats::Scope BudgetStats::forScope(const std::string& scope) {
  return Scope{&spent.Add({{"scope", scope}}), &limit.Add({{"scope", scope}}),
               &exhausted.Add({{"scope", scope}}), &projected.Add({{"scope", scope}})};
}

}  // namespace assay::llm
