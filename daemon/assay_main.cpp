// assay: companion command-line tool of assayd (CONTRACT.md §1, §4).
//   assay report --judgments FILE [--events FILE] [--label POINTER] [--group POINTER] [--auc
//   JUDGE]...
//   assay estimate (--requests-per-second R | --requests-per-day N) --sample-rate S
//   --judge MODEL[:RATE[:IN:OUT]]... [--usd-to-eur X] [--price MODEL=IN/CACHED/OUT]...

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "daemon/estimate.hpp"
#include "daemon/report.hpp"
#include "daemon/version.hpp"

namespace {

constexpr const char* kUsage =
    R"(usage: assay report --judgments FILE [--events FILE] [--label POINTER]
                    [--group POINTER] [--auc JUDGE]...
       assay estimate (--requests-per-second R | --requests-per-day N) --sample-rate S
                      --judge MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]...
                      [--usd-to-eur X] [--price MODEL=IN/CACHED/OUT]...
       assay --version

report   summarise a judgments JSON Lines file: per judge the outcomes and score distribution;
         with --events (JSON Lines events carrying human labels), the ROC AUC of each --auc judge
         (default context_overlap) for the boolean label at --label (default
         /labels/hallucinated), overall and per --group (default /labels/source_dataset)
estimate print the projected LLM-judge cost: per judge and in total, calls per day and cost per
         call, per day and per 30-day month in USD and EUR. A judge sees requests/day x sample
         rate x its RATE (default 1) calls a day, of INPUT_TOKENS/OUTPUT_TOKENS (default
         800/200) each; --usd-to-eur defaults to 0.92; --price sets or overrides a model's
         price in USD per million tokens (IN/OUT when there is no cached rate)
exit codes: 0 done, 2 bad arguments, unreadable file or unpriced model
)";

int usage(const std::string& msg) {
  std::cerr << "assay: " << msg << "\n" << kUsage;
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
    if (std::find_if(args.begin(), args.end(), [](const std::string& a) {
          return a == "--help" || a == "-h";
        }) != args.end()) {
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
  if (cmd != "report") return usage("unknown command '" + cmd + "'");
  assay::ReportOptions o;
  bool auc_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    static const std::vector<std::string> kFlags = {"--judgments", "--events", "--label", "--group",
                                                    "--auc"};
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
    else if (a == "--auc") {
      if (!auc_given) o.auc_judges.clear(), auc_given = true;
      o.auc_judges.push_back(v);
    } else
      return usage("unknown argument '" + a + "'");
  }
  if (o.judgments_path.empty()) return usage("--judgments FILE is required");
  for (const auto* p : {&o.label_pointer, &o.group_pointer})
    if (!p->empty() && p->front() != '/') return usage("'" + *p + "' is not a JSON Pointer");
  return assay::runReport(o, std::cout);
}
