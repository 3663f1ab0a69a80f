// assay: companion command-line tool of assayd (README.md; docs/calibration.md).
//   assay report --judgments FILE [--events FILE] [--label POINTER] [--group POINTER] [--auc
//   JUDGE]...
//   assay estimate (--requests-per-second R | --requests-per-day N) --sample-rate S
//   --judge MODEL[:RATE[:IN:OUT]]... [--usd-to-eur X] [--price MODEL=IN/CACHED/OUT]...
//   assay calibrate --input FILE [--format csv|jsonl] [--item COL[,COL]...] [--judge COL]
//   [--human COL]... [--annotator COL] [--levels A,B,...] [--min-score X] [--max-score Y]
//   [--leniency-max-ratio R] [--min-samples N]

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "config/loader.hpp"
#include "daemon/version.hpp"
#include "judges/cli/calibrate.hpp"
#include "judges/cli/cli_text.hpp"
#include "judges/cli/estimate.hpp"
#include "judges/cli/report.hpp"

namespace {

constexpr const char* kUsage =
    R"(usage: assay report --judgments FILE [--events FILE] [--label POINTER]
                    [--group POINTER] [--auc JUDGE]... [--human POINTER]
                    [--human-criterion NAME] [--config ASSAYD.yaml]
       assay estimate (--requests-per-second R | --requests-per-day N) --sample-rate S
                      --judge MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]...
                      [--usd-to-eur X] [--price MODEL=IN/CACHED/OUT]...
       assay calibrate --input FILE [--format csv|jsonl] [--item COL[,COL]...]
                       [--judge COL] [--human COL]... [--annotator COL]
                       [--levels A,B,...] [--min-score X] [--max-score Y]
                       [--leniency-max-ratio R] [--min-samples N]
       assay --version

report   summarise a judgments JSON Lines file: per judge the outcomes and score distribution;
         with --events (JSON Lines events carrying human labels), the ROC AUC of each --auc judge
         (default context_overlap) for the boolean label at --label (default
         /labels/hallucinated), overall and per --group (default /labels/source_dataset),
         and the Spearman/Kendall agreement of every judge of --human-criterion (default
         faithfulness) with the numeric human score at --human (default /labels/faithfulness;
         "" = none); always leniency, drift and agreement between judges of one criterion,
         with the tracking settings of --config (default: the daemon's defaults)
estimate print the projected LLM-judge cost: per judge and in total, calls per day and cost per
         call, per day and per 30-day month in USD and EUR. A judge sees requests/day x sample
         rate x its RATE (default 1) calls a day, of INPUT_TOKENS/OUTPUT_TOKENS (default
         800/200) each; --usd-to-eur defaults to 0.92; --price sets or overrides a model's
         price in USD per million tokens (IN/OUT when there is no cached rate)
calibrate compare a judge's scores with human scores on the same items (docs/calibration.md):
         a CSV or JSON Lines file with one row per item (--judge, default judge_score;
         --human, default every human* column) or, with --annotator, one row per item and
         annotator; --item (default item) names the item, several columns joined; --levels
         maps text values to 1..k. Prints Spearman (with p) and Kendall tau-b judge vs the
         mean human score per item and vs each annotation, exact agreement, Cohen's kappa
         judge-human and between annotators, the score distributions, and a verdict: usable,
         rework the rubric (annotator kappa < 0.6, Spearman < 0.5 or p >= 0.05) or too
         lenient (top-score share > --leniency-max-ratio, default 0.8, over at least
         --min-samples items, default 100)
exit codes: 0 done, 2 bad arguments, unreadable file, unpriced model or no usable row
)";

/// A usage error: the message and where the usage is, not the whole usage text.
int usage(const std::string& msg) {
  std::cerr << "assay: " << msg << "\n(assay --help prints the usage)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("a command is required");
  const std::string cmd = argv[1];
  if (cmd == "--version") {
    std::cout << "assay " << assay::kAssayVersion << "\n";
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (cmd == "estimate") {
    const std::vector<std::string> args(argv + 2, argv + argc);
    if (assay::cli::wantsHelp(args)) {
      std::cout << kUsage;
      return 0;
    }
    try {
      assay::printEstimate(assay::computeEstimate(assay::parseEstimateArgs(args)), std::cout);
      return 0;
    } catch (const assay::EstimateError& e) {
      return usage(e.what());
    }
  }
  if (cmd == "calibrate") {
    const std::vector<std::string> args(argv + 2, argv + argc);
    if (assay::cli::wantsHelp(args)) {
      std::cout << kUsage;
      return 0;
    }
    try {
      return assay::runCalibrate(assay::parseCalibrateArgs(args), std::cout, std::cerr);
    } catch (const assay::CalibrateError& e) {
      return usage(e.what());
    }
  }
  if (cmd != "report") return usage("unknown command '" + cmd + "'");
  assay::ReportOptions o;
  bool auc_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    static const std::vector<std::string> kFlags = {"--judgments",       "--events", "--label",
                                                    "--group",           "--auc",    "--human",
                                                    "--human-criterion", "--config"};
    if (std::find(kFlags.begin(), kFlags.end(), a) == kFlags.end())
      return usage("unknown argument '" + a + "'");
    if (i + 1 >= argc) return usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--judgments")
      o.judgments_path = v;
    else if (a == "--events")
      o.events_path = v;
    else if (a == "--label")
      o.label_pointer = v;
    else if (a == "--group")
      o.group_pointer = v;
    else if (a == "--human")
      o.human_pointer = v;
    else if (a == "--human-criterion")
      o.human_criterion = v;
    else if (a == "--config") {
      const auto res = assay::loadConfigFile(v);
      for (const auto& e : res.errors) std::cerr << e.format() << "\n";
      if (!res.ok()) return 2;
      o.tracking = res.config.tracking;
    } else if (a == "--auc") {
      if (!auc_given) o.auc_judges.clear(), auc_given = true;
      o.auc_judges.push_back(v);
    } else
      return usage("unknown argument '" + a + "'");
  }
  if (o.judgments_path.empty()) return usage("--judgments FILE is required");
  for (const auto* p : {&o.label_pointer, &o.group_pointer, &o.human_pointer})
    if (!p->empty() && p->front() != '/') return usage("'" + *p + "' is not a JSON Pointer");
  return assay::runReport(o, std::cout);
}
