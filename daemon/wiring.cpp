#include "daemon/wiring.hpp"

#include <prometheus/counter.h>
#include <spdlog/spdlog.h>

namespace assay {

std::vector<TrackedJudge> trackedJudges(const Config& config) {
  std::vector<TrackedJudge> out;
  for (const auto& jc : config.judges) {
    const JudgeInfo info = jc.factory->info(jc.values);
    out.push_back({jc.name, info.criterion, info.min_score, info.max_score, info.graded,
                   jc.version ? jc.version->id : ""});
  }
  return out;
}

std::size_t pendingLimit(const Config& config) {
  std::size_t limit = config.limits.queue_capacity;
  for (const auto& j : config.judges)
    if (j.values.getBool("batch", false))
      limit += static_cast<std::size_t>(j.values.getInt("batch_max_pending_events", 50'000));
  return limit;
}

void connectRedaction(const Config& config, JudgeRunner& runner, prometheus::Registry& registry) {
  if (config.redact.detectors.empty() && config.redact.patterns.empty()) return;
  auto redactor = std::make_shared<const Redactor>(config.redact);
  auto& family = prometheus::BuildCounter()
                     .Name("assay_redactions_total")
                     .Help(
                         "Values replaced by a placeholder before an LLM call (redact), by "
                         "detector (built-in or the name of a redact.patterns entry)")
                     .Register(registry);
  std::vector<prometheus::Counter*> counters;
  std::string names;
  for (const auto& label : redactor->labels()) {
    counters.push_back(&family.Add({{"detector", label}}));
    names += (names.empty() ? "" : ", ") + label;
  }
  runner.setRedaction(redactor, std::move(counters));
  spdlog::info("redact: {} replaced before every LLM call{}{}", names,
               config.redact.local_judges ? ", for the local judges too" : "",
               config.redact.sinks ? ", and in the judgments' evidence" : "");
}

void connectAb(const Config& config, ab::AbService* ab, ScoreTracker& tracker) {
  if (!ab) return;
  tracker.setSharedAb(
      {[ab](const std::string& experiment, const std::string& variant, const std::string& unit,
            int stars, const std::string& id) -> const char* {
         const auto* e = ab->find(experiment);
         return e ? ab->rate(*e, variant, unit, stars, id) : nullptr;
       },
       [ab] {
         std::vector<SharedExperiment> out;
         for (const auto& s : ab->snapshot()) {
           if (!s.available && s.decision.ratings.empty()) continue;  // never answered
           SharedExperiment x;
           x.name = s.experiment;
           x.arms = s.arms;
           x.ratings = s.decision.ratings;
           x.chi = s.decision.chi;
           x.anytime_p = s.decision.anytime_p;
           if (const auto& d = s.table.recorded) {
             x.decided = true;
             x.winner = d->winner;
             x.decision_p = d->p;
             x.decision_time_s = static_cast<double>(d->at_ms) / 1000.0;
             x.decision_ratings = d->ratings;
           }
           out.push_back(std::move(x));
         }
         return out;
       }});
  spdlog::info("ab: {} experiment(s) routed at /v1/route, decided by the {} rule, tables in {}",
               config.ab.experiments.size(),
               config.ab.decision == "anytime" ? "anytime-valid" : "chi-square (peeking)",
               config.budget.store == "memory" ? "this process's memory (store: memory)"
                                               : "the shared budget store");
}

}  // namespace assay
