// The `assay` command line: each subcommand's --help is its own, `assay --help` the overview.
#include "cli/cli.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"

using assay::cli::runAssay;
using Run = assay::test::CliRun;

namespace {

assay::test::CliRun run(const std::vector<std::string>& args) { return assay::test::runCli(args); }

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("assay COMMAND --help prints that command's usage and options only, on stdout, exit 0") {
  const std::vector<std::string> commands = {"report", "calibrate", "estimate"};
  for (const auto& cmd : commands) {
    for (const char* flag : {"--help", "-h"}) {
      CAPTURE(cmd);
      const Run r = run({cmd, flag});
      CHECK(r.code == 0);
      CHECK(r.err.empty());
      CHECK(r.out.rfind("usage: assay " + cmd + " ", 0) == 0);
      CHECK(has(r.out, "exit codes: 0 done"));
      for (const auto& other : commands) {
        if (other == cmd) continue;  // no synopsis of another command ("assay report --…")
        CHECK_FALSE(has(r.out, "assay " + other + " -"));
        CHECK_FALSE(has(r.out, "assay " + other + " ("));
      }
    }
    CHECK(run({"help", cmd}).out == run({cmd, "--help"}).out);
  }
  // --help anywhere among the arguments, even after others.
  CHECK(run({"report", "--judgments", "x.jsonl", "--help"}).out == run({"report", "-h"}).out);
  CHECK(has(run({"report", "--help"}).out, "  --human-criterion NAME"));
  CHECK(has(run({"calibrate", "--help"}).out, "--judgments FILE --judge NAME"));
  CHECK(has(run({"estimate", "--help"}).out, "  --config ASSAYD.yaml"));
}

TEST_CASE("assay --help prints the overview of every command, then each command's help") {
  const Run r = run({"--help"});
  CHECK(r.code == 0);
  CHECK(r.out.rfind("usage: assay report --judgments FILE", 0) == 0);
  for (const char* line : {"\n       assay calibrate --input FILE", "\n       assay estimate",
                           "\n       assay COMMAND --help", "\nreport    summarise",
                           "\ncalibrate a judge's scores", "\nestimate  what LLM judges"})
    CHECK(has(r.out, line));
  // The whole manual follows (the package's man page is made of it).
  const auto report = r.out.find("\nusage: assay report --judgments FILE [--events FILE] [--label");
  const auto calibrate = r.out.find("\nusage: assay calibrate --input FILE [--format");
  const auto estimate = r.out.find("\nusage: assay estimate (--requests-per-second");
  CHECK(report != std::string::npos);
  CHECK(calibrate > report);
  CHECK(estimate > calibrate);
  CHECK(estimate != std::string::npos);
  CHECK(run({"-h"}).out == r.out);
  CHECK(run({"help"}).out == r.out);
}

TEST_CASE("usage errors: one line and where the help is, exit 2") {
  Run r = run({});
  CHECK(r.code == 2);
  CHECK(r.err == "assay: a command is required\n(assay --help prints the usage)\n");
  r = run({"frobnicate"});
  CHECK(r.code == 2);
  CHECK(r.err == "assay: unknown command 'frobnicate'\n(assay --help prints the usage)\n");
  r = run({"report", "--bogus"});
  CHECK(r.code == 2);
  CHECK(r.err == "assay: unknown argument '--bogus'\n(assay report --help prints the usage)\n");
  CHECK(run({"report"}).err ==
        "assay: --judgments FILE is required\n(assay report --help prints the usage)\n");
  CHECK(run({"estimate", "--judge", "gpt-4o"}).err.rfind("assay: --requests-per-second", 0) == 0);
  CHECK(has(run({"estimate"}).err, "(assay estimate --help prints the usage)"));
  CHECK(has(run({"calibrate"}).err, "(assay calibrate --help prints the usage)"));
  CHECK(run({"report"}).out.empty());
}
