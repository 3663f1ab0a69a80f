#include "cli/ab_command.hpp"

#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "config/loader.hpp"
#include "core/clock.hpp"
#include "daemon/ab/ab.hpp"

namespace assay::cli {
namespace {

void printStatus(const AbExperiment& e, const ab::Table& t, const AbOptions& options,
                 std::ostream& out) {
  const ab::Decision d = ab::decide(t, options);
  out << fmt::format("experiment {} (run {}, {} ratings)\n", e.name, t.run, t.total);
  for (std::size_t a = 0; a < e.arms.size(); ++a)
    out << fmt::format("  {:<16} {:>8} ratings  mean stars {}\n", e.arms[a], d.ratings[a],
                       d.mean_stars[a] ? fmt::format("{:.2f}", *d.mean_stars[a]) : "-");
  out << fmt::format("  now: anytime-valid p {:.4g}, chi-square p {}; the {} rule {}\n",
                     d.anytime_p, d.chi ? fmt::format("{:.4g}", d.chi->p_value) : "-",
                     options.decision, d.decided ? "holds" : "does not hold");
  if (!t.recorded) {
    out << "  decision: none yet (the router splits units by the arms' shares)\n";
    return;
  }
  const auto& r = *t.recorded;
  std::int64_t then = 0;
  for (auto n : r.ratings) then += n;
  out << fmt::format(
      "  decision: winner {} at {}, {} p {:.4g}, on {} ratings; {} since, which do not "
      "re-decide it\n",
      e.arms[r.winner], utcSeconds(r.at_ms), r.rule, r.p, then, t.total - then);
}

}  // namespace

AbCommandOptions parseAbArgs(const std::vector<std::string>& args) {
  AbCommandOptions o;
  if (args.empty() || (args[0] != "status" && args[0] != "reset"))
    throw AbCommandError("expected status or reset");
  o.action = args[0];
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--yes") {
      o.yes = true;
      continue;
    }
    if (a != "--config" && a != "--experiment")
      throw AbCommandError("unknown argument '" + a + "'");
    if (i + 1 >= args.size()) throw AbCommandError(a + " needs a value");
    (a == "--config" ? o.config_path : o.experiment.emplace()) = args[++i];
  }
  if (o.config_path.empty()) throw AbCommandError("--config ASSAYD.yaml is required");
  if (o.action == "reset" && !o.experiment) throw AbCommandError("reset needs --experiment NAME");
  if (o.action == "reset" && !o.yes)
    throw AbCommandError(
        "reset archives the experiment's ratings and decision and starts it again: add --yes");
  return o;
}

int runAbCommand(const AbCommandOptions& o, std::ostream& out, std::ostream& err) {
  const LoadResult res = loadConfigFile(o.config_path);
  if (!res.ok()) throw AbCommandError(res.refusal());
  const Config& c = res.config;
  if (c.ab.experiments.empty()) throw AbCommandError(o.config_path + " has no ab.experiments");
  if (c.budget.store == "memory")
    throw AbCommandError(
        "budget.store is memory: each assayd process holds its own tables and decisions, "
        "which a restart of assayd resets; `assay ab` reads and resets a shared store (redis://)");
  std::vector<const AbExperiment*> chosen;
  std::string names;
  for (const auto& e : c.ab.experiments) {
    names += (names.empty() ? "" : ", ") + e.name;
    if (!o.experiment || *o.experiment == e.name) chosen.push_back(&e);
  }
  if (chosen.empty())
    throw AbCommandError("no experiment '" + *o.experiment + "' in " + o.config_path +
                         " (ab.experiments: " + names + ")");
  const auto store = ab::makeStore(c.budget);
  for (const AbExperiment* e : chosen) {
    if (o.action == "reset") {
      const auto before = store->table(*e);
      const auto now_ms = epochMs();
      const auto run = before ? store->reset(*e, now_ms) : std::nullopt;
      if (!run) {
        err << "assay: the store " << c.budget.store << " does not answer; nothing was reset\n";
        return 1;
      }
      out << fmt::format(
          "experiment {} reset: run {} starts; {} ratings{} archived as table:reset:{}; the "
          "instances split units again within a second\n",
          e->name, *run, before->total,
          before->recorded ? " and the decision (winner " + e->arms[before->recorded->winner] + ")"
                           : "",
          now_ms);
      continue;
    }
    const auto t = store->table(*e);
    if (!t) {
      err << "assay: the store " << c.budget.store << " does not answer\n";
      return 1;
    }
    printStatus(*e, *t, c.ab, out);
  }
  return 0;
}

}  // namespace assay::cli
