#pragma once
/// The `assay` command line (README.md; docs/calibration.md): the overview and each
/// subcommand's help, and the dispatch to report, calibrate and estimate. assay_main.cpp adds
/// --version; the tests call runAssay directly.

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace assay::cli {

/// `assay COMMAND --help` (or `assay help COMMAND`) for report, calibrate and estimate: that
/// command's usage and options only; empty for any other name. `assay --help` prints an
/// overview of the commands followed by the three.
std::string_view commandHelp(std::string_view command);

/// Runs `assay ARGS…` (args exclude the program name): help on stdout with exit code 0, the
/// command's output on `out`, messages on `err`; returns the exit code (0 done, 2 bad
/// arguments, unreadable file, unpriced model or no usable row).
int runAssay(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace assay::cli
