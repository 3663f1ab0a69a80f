#pragma once
/// `assay bakeoff --config FILE` (docs/bakeoff.md): the cost estimate, then the arms'
/// generations and the listwise judge calls, then the report (Markdown on stdout, --json,
/// --html) and a progress bar on a terminal.

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace assay::cli {

/// The command's usage and options.
extern const std::string_view kBakeoffHelp;

/// Runs `assay bakeoff ARGS…`: 0 done, 2 bad arguments or configuration (every error with its
/// FILE:LINE:COLUMN), an unpriced model or an unset key variable, 3 the estimate is above
/// --max-cost-eur (no call made), 1 no judge call succeeded.
int runBakeoffCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace assay::cli
