#include "daemon/coverage.hpp"

#include <set>

namespace assay {
namespace {

double value(const prometheus::ClientMetric& m, prometheus::MetricType type) {
  return type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
}

std::string labelOf(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "";
}

}  // namespace

Coverage coverageOf(const std::vector<prometheus::MetricFamily>& families) {
  static const std::set<std::string> kEnded = {
      "assay_events_replay_skipped_total", "assay_events_invalid_total",
      "assay_events_sampled_out_total", "assay_samples_dropped_total"};
  static const std::set<std::string> kPerJudge = {
      "assay_judge_runs_total", "assay_judge_skipped_total", "assay_judge_abandoned_total"};
  Coverage c;
  double ended = 0;
  std::map<std::string, double> terminal;
  for (const auto& f : families)
    for (const auto& m : f.metric) {
      const double v = value(m, f.type);
      if (f.name == "assay_events_consumed_total")
        c.consumed += v;
      else if (f.name == "assay_events_finished_total")
        c.finished += v;
      else if (kEnded.count(f.name))
        ended += v;
      else if (kPerJudge.count(f.name))
        terminal[labelOf(m, "judge")] += v;
    }
  for (const auto& [judge, n] : terminal) c.unaccounted[judge] = c.finished - ended - n;
  return c;
}

}  // namespace assay
