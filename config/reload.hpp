#pragma once
/// What a configuration reload (SIGHUP) can apply to a running assayd, and what needs a restart
/// (docs/configuration.md, "Reloading"). Both files are compared structurally (YAML values, not
/// text: comments, key order and layout do not count).

#include <cstddef>
#include <string>
#include <vector>

namespace assay {

struct ReloadDiff {
  bool sampling = false;                 ///< `sampling` differs: applied live (rate, rules)
  bool log = false;                      ///< `log` differs: applied live (level, format)
  std::vector<std::size_t> judge_rates;  ///< judges whose `rate` alone differs: applied live
  /// `judges` differs beyond rates (a judge added, removed, moved or with other options): the
  /// judges are rebuilt live; `changed_judges` says what changed, by name: "added 'x'",
  /// "changed 'y'", "removed 'z'", or "reordered".
  bool judges = false;
  std::vector<std::string> changed_judges;
  bool budget_cap = false;  ///< `budget.daily_limit_eur` differs: applied live (judges rebuilt)
  /// What differs otherwise, one entry per section ("kafka", "budget"): needs a restart.
  std::vector<std::string> restart;
  bool empty() const {
    return !sampling && !log && judge_rates.empty() && !judges && !budget_cap && restart.empty();
  }
};

/// Compares the running configuration's YAML text with the new one's. Both must have loaded
/// without error (loadConfigString); a text that does not parse counts as entirely different.
ReloadDiff diffConfigs(const std::string& running_yaml, const std::string& new_yaml);

}  // namespace assay
