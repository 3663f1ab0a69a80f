#pragma once
/// `assay prompt`: the request each LLM judge of an assayd configuration sends for one event,
/// built by the judge's own code (rubric, prompt, reply schema, provider body) without calling
/// anyone: what a custom criterion's author reads before spending a cent (docs/configuration.md,
/// "Custom criteria").

#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace assay::cli {

struct ShowPromptError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ShowPromptOptions {
  std::string config_path;          ///< --config: assayd's configuration (required)
  std::vector<std::string> judges;  ///< --judge NAME (repeatable); empty = every LLM judge
  std::string events_path;          ///< --events: JSON Lines in the event format; "" = a sample
  std::optional<std::string> id;    ///< --id: the event of that id (default: the first that parses)
  bool body = false;                ///< --body: the exact request bodies, one JSON line each
};

/// Parses the command's arguments; ShowPromptError names the problem.
ShowPromptOptions parseShowPromptArgs(const std::vector<std::string>& args);

/// Prints, for each chosen judge: its criterion, scale, model and endpoint URL, the prompt's
/// estimated tokens and the most one call can cost (euros, at max_tokens), then the system and
/// user messages and the reply schema (or, with `body`, the request body as sent). The event is
/// parsed with the configuration's event fields and redacted as assayd would before a judge
/// sees it. Exit code 0, or ShowPromptError: an invalid configuration (its FILE:LINE:COL
/// errors), an unknown judge, an unreadable events file, no event that parses.
int runShowPrompt(const ShowPromptOptions& o, std::ostream& out);

}  // namespace assay::cli
