#pragma once
/// `assay ab status|reset`: an operator's view of the A/B experiments in the shared store
/// (docs/ab.md): each experiment's table, its p-values, and its recorded decision; and the
/// one way to undo a decision, a reset that archives the table and starts the experiment again.

#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace assay::cli {

struct AbCommandError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct AbCommandOptions {
  std::string action;                     ///< "status" or "reset"
  std::string config_path;                ///< --config: assayd's configuration (required)
  std::optional<std::string> experiment;  ///< --experiment NAME (required by reset)
  bool yes = false;                       ///< --yes: reset without a second thought
};

/// Parses `status|reset` and its flags; AbCommandError names the problem.
AbCommandOptions parseAbArgs(const std::vector<std::string>& args);

/// status: per experiment (or the one named), the store's table (ratings and mean stars per
/// arm), the anytime-valid and chi-square p-values on it, the run, and the recorded decision
/// (winner, rule, p, time, ratings then, ratings since). reset: archives the experiment's table
/// and decision (the running instances see it within a second and split units again) and
/// prints the new run. 0 done; 1 the store does not answer; AbCommandError (exit 2): a bad
/// configuration, an unknown experiment, `store: memory` (each process holds its own table:
/// restarting assayd resets it), reset without --experiment or --yes.
int runAbCommand(const AbCommandOptions& o, std::ostream& out, std::ostream& err);

}  // namespace assay::cli
