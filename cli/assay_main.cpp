// assay: companion command-line tool of assayd (README.md; docs/calibration.md).
//   assay report --judgments FILE [--events FILE] [options]
//   assay calibrate --input FILE [options]
//   assay calibrate --judgments FILE --judge NAME (--events | --feedback | --input) FILE
//   assay estimate (--requests-per-second R | --requests-per-day N)
//                  (--config ASSAYD.yaml | --sample-rate S --judge MODEL...) [options]
//   assay --help, assay COMMAND --help, assay --version
// The commands and their help are in cli/cli.cpp.

#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "daemon/version.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--version") {
    std::cout << "assay " << assay::kAssayVersion << "\n";
    return 0;
  }
  return assay::cli::runAssay(args, std::cout, std::cerr);
}
