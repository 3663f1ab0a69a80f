#pragma once
// Runs the `assay` command line in-process, as a test sees it: exit code, stdout, stderr.
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

namespace assay::test {

struct CliRun {
  int code;
  std::string out, err;
};

inline CliRun runCli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = cli::runAssay(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace assay::test
