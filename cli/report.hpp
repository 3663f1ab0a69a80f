#pragma once
/// `assay report`: reads a JSON Lines judgments file (docs/events.md, "Output") and, optionally,
/// the events file with human labels, and summarises per judge the outcomes and score distribution,
/// and how well a judge's score separates answers humans labelled hallucinated (ROC AUC).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "tracking/stats.hpp"

namespace assay {

/// ROC AUC (tracking/stats.hpp), as the report and the canary compute it.
using stats::rocAuc;

/// One escalation threshold of a cascade `run_if: [{judge: J, below: threshold}]`: the LLM
/// judge runs on the events whose score is below `threshold`.
struct CascadePoint {
  double threshold = 0;
  double share = 0;   ///< events sent on / events scored, [0, 1]
  double recall = 0;  ///< positives sent on / positives, [0, 1]
};

/// The cascade curve of `scores` (a LOW score predicts the positive label) at every threshold
/// that changes it: midway between consecutive distinct scores, then above the highest score
/// (everything escalated). Ascending thresholds; share and recall never decrease along it.
/// Empty when there is no score; recall is 0 throughout without a positive.
std::vector<CascadePoint> cascadeCurve(const std::vector<double>& scores,
                                       const std::vector<bool>& labels);

/// The first point of `curve` whose recall reaches `recall` (the lowest LLM share that does),
/// or nullptr when none does.
const CascadePoint* cascadeForRecall(const std::vector<CascadePoint>& curve, double recall);

struct JudgeSummary {
  /// What the report calls it: the judge's name, or `name@version` when the file holds more
  /// than one version of it (and --across-versions is not given).
  std::string judge;
  std::string name, criterion;  ///< the configured name (`judge` of the verdicts)
  /// Its `judge_version` ("" for verdicts written without one); with --across-versions every
  /// version seen, in file order.
  std::vector<std::string> versions;
  std::vector<std::pair<std::string, std::string>> version_fields;  ///< of the first verdict
  std::string first_judged_at, last_judged_at;                      ///< as written
  /// Verdicts written before judge versions existed (no judge_version), counted with the one
  /// version written since (the only one: nothing tells them apart).
  long pooled_unversioned = 0;
  double min_score = 0, max_score = 1;
  std::map<std::string, long> outcomes;  ///< "ok", "no_context", …
  std::vector<double> scores;            ///< ok runs only
  std::vector<double> times;             ///< their judged_at, Unix seconds (0 when absent)
  bool pass_fail = false;                ///< a check (its verdicts carry `passed`)
};

struct ReportOptions {
  std::string judgments_path;
  std::string events_path;                               ///< empty = no label analysis
  std::string label_pointer = "/labels/hallucinated";    ///< JSON Pointer of a boolean label
  std::string group_pointer = "/labels/source_dataset";  ///< AUC per group; "" = none
  /// Judges whose AUC is reported; by default the two faithfulness proxies, each when present.
  std::vector<std::string> auc_judges = {"context_overlap", "claim_support"};
  bool auc_given = false;  ///< --auc named them: a judge without scores is an error line
  /// `--cascade JUDGE`: escalation thresholds of JUDGE, LLM share and recall of the label.
  std::vector<std::string> cascade_judges;
  double cascade_recall = 0.9;  ///< `--recall`: the recall the threshold must reach, (0, 1]
  /// `--price-per-call EUR`: the LLM judge's price per call, euros (assay estimate's per-call
  /// figure): the cascade then prints the euros per hallucination caught at each threshold.
  std::optional<double> price_per_call;
  /// `--half A|B`: only the labelled events with XXH3_64(id) < 2^63 (A: those a
  /// `sampling.rate: 0.5` samples) or the others (B); "" = all. For honest selection: choose on
  /// one half, report the other (docs/claim-support.md).
  std::string half;
  /// JSON Pointer of a numeric human score in the events (e.g. ExpertQA's faithfulness in
  /// [0, 1]); Spearman and Kendall tau-b with every judge of `human_criterion`. "" = none.
  std::string human_pointer = "/labels/faithfulness";
  std::string human_criterion = "faithfulness";
  /// Leniency and drift settings (`assay report --config FILE` takes the daemon's own).
  TrackingOptions tracking;
  /// `--across-versions`: pool the verdicts of a judge's versions (judge_version) in one
  /// summary; by default each version is summarised, tested and compared on its own.
  bool across_versions = false;
};

/// Prints the report to `out`; returns 0, or 2 with a message on `err` when a file cannot be
/// read or has lines but no judgment (line-level problems are counted and reported, not
/// fatal). An empty judgments file (nothing judged yet) prints "judgments: none yet" and
/// returns 0.
int runReport(const ReportOptions& options, std::ostream& out, std::ostream& err);
/// The same with messages on stderr.
int runReport(const ReportOptions& options, std::ostream& out);

}  // namespace assay
