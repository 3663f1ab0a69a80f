#pragma once
/// A bakeoff's report in three forms (docs/bakeoff.md): Markdown (stdout), the full result as
/// JSON (--json), and one self-contained HTML page (--html: inline CSS and SVG, no script, no
/// network) with the arms' intervals as a chart, the judges' agreement and the position audit.

#include <cstdint>
#include <string>

#include "cli/bakeoff/config.hpp"
#include "cli/bakeoff/run.hpp"

namespace assay::bakeoff {

struct ReportInput {
  const BakeoffConfig& config;
  const RunResult& result;
  const Estimate& estimate;
  std::uint64_t seed = 0;
  double usd_to_eur = 0.92;
};

/// Per arm and criterion, the mean score (0–100) over judges, passes and inputs judged.
std::vector<std::vector<double>> criterionMeans(const ReportInput& in);

std::string markdownReport(const ReportInput& in);
std::string jsonReport(const ReportInput& in);
std::string htmlReport(const ReportInput& in);

}  // namespace assay::bakeoff
