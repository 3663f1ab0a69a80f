#include "cli/bakeoff.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>

#include "cli/bakeoff/config.hpp"
#include "cli/bakeoff/report.hpp"
#include "cli/bakeoff/run.hpp"
#include "config/loader.hpp"
#include "core/clock.hpp"
#include "judges/llm/budget.hpp"

namespace assay::cli {

const std::string_view kBakeoffHelp =
    R"(usage: assay bakeoff --config BAKEOFF.yaml [--json FILE] [--html FILE]
                     [--max-cost-eur X] [--budget-config ASSAYD.yaml] [--seed N]
                     [--history FILE] [--dry-run] [--no-progress]

Compares 2 to 8 arms (recorded outputs, live generations or workflows) on the same 1 to 10
inputs with 2 or 3 LLM judges scoring every arm side by side (listwise, 0-100 per criterion,
labels drawn at random for every call), then prints the consensus with 95 % intervals, the
judges' agreement (Kendall tau-b, Spearman rho) and a position audit (docs/bakeoff.md).
The cost estimate comes first, before any call.

  --config FILE            the bakeoff file (required)
  --json FILE              write the full result as JSON
  --html FILE              write a self-contained HTML report (inline SVG, no network)
  --max-cost-eur X         refuse to start when the estimate is above X euros (exit 3)
  --budget-config FILE     assayd's configuration: its budget (store, daily cap, time zone,
                           prices, usd_to_eur) applies to every call (default: a memory ledger
                           with the default €5/day cap and the built-in prices)
  --seed N                 the label orders' seed (default: the file's seed, else drawn)
  --history FILE           the usage history the estimate reads and every call is added to
                           (default $XDG_STATE_HOME/assay/bakeoff_usage.jsonl)
  --dry-run                print the estimate and stop
  --no-progress            no progress bar (it is drawn only on a terminal anyway)

Exit codes: 0 every call succeeded; 1 some call failed (the report covers the rest) or no
judge call succeeded; 2 a bad argument or file, an unpriced model, an unset key variable; 3 the
estimate is above --max-cost-eur or above what is left of today's budget (no call made).
)";

namespace {

struct Flags {
  std::string config, json, html, budget_config, history;
  std::optional<double> max_cost_eur;
  std::optional<std::uint64_t> seed;
  bool dry_run = false, progress = true;
};

int usageError(const std::string& msg, std::ostream& err) {
  err << "assay: " << msg << "\n(assay bakeoff --help prints the usage)\n";
  return 2;
}

std::optional<std::string> parseFlags(const std::vector<std::string>& args, Flags& f) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--dry-run") {
      f.dry_run = true;
      continue;
    }
    if (a == "--no-progress") {
      f.progress = false;
      continue;
    }
    static const std::vector<std::string> kValued = {
        "--config", "--json", "--html", "--max-cost-eur", "--budget-config", "--seed", "--history"};
    if (std::find(kValued.begin(), kValued.end(), a) == kValued.end())
      return "unknown argument '" + a + "'";
    if (i + 1 >= args.size()) return a + " needs a value";
    const std::string& v = args[++i];
    try {
      std::size_t used = 0;
      if (a == "--max-cost-eur") {
        f.max_cost_eur = std::stod(v, &used);
        if (used != v.size() || !(*f.max_cost_eur >= 0)) throw std::invalid_argument(v);
      } else if (a == "--seed") {
        f.seed = std::stoull(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      }
    } catch (const std::exception&) {
      return a + " '" + v + "': expected a " + (a == "--seed" ? "whole" : "non-negative") +
             " number";
    }
    if (a == "--config") f.config = v;
    if (a == "--json") f.json = v;
    if (a == "--html") f.html = v;
    if (a == "--budget-config") f.budget_config = v;
    if (a == "--history") f.history = v;
  }
  if (f.config.empty()) return std::string("--config FILE is required");
  return std::nullopt;
}

void printEstimate(const bakeoff::Estimate& e, std::ostream& out) {
  out << "Estimate before any call: " << e.calls << " calls, $" << std::fixed
      << std::setprecision(4) << e.usd << " = €" << e.eur << "\n";
  for (const auto& l : e.lines)
    out << "  " << std::left << std::setw(8) << l.role << " " << std::setw(28) << l.who << " "
        << std::setw(22) << l.model << std::right << std::setw(4) << l.calls << " calls, "
        << l.prompt_tokens << " prompt + " << l.completion_tokens << " completion tokens ("
        << (l.completion_from_history ? "median of earlier calls" : "max_tokens, the most")
        << "), $" << l.usd << "\n";
  out.unsetf(std::ios::fixed);
}

/// Writes `text` to `path`; false (and a message) when it cannot.
bool writeFile(const std::string& path, const std::string& text, std::ostream& err) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (f) return true;
  err << "assay: cannot write " << path << "\n";
  return false;
}

/// The budget of --budget-config (store, caps, prices); an exit code when it cannot be read.
std::optional<int> readBudget(const Flags& f, bakeoff::RunOptions& options, std::ostream& err) {
  if (f.budget_config.empty()) return std::nullopt;
  const auto res = loadConfigFile(f.budget_config);
  for (const auto& e : res.errors) err << e.format() << "\n";
  if (!res.ok()) return 2;
  options.budget = res.config.budget;
  for (const auto& p : options.budget.prices)
    options.prices.set(p.model, llm::ModelPrice{p.input, p.cached_input, p.output, p.cache_write});
  return std::nullopt;
}

/// The daily cap applies to every call: a bakeoff that cannot fit in what is left today would
/// stop half-way with inputs unjudged, so it does not start. An exit code when it must not.
std::optional<int> checkBudgetLeft(const bakeoff::RunOptions& options, llm::BudgetStore& store,
                                   double estimate_eur, std::ostream& err) {
  const auto now_ms = epochMs();
  const auto spent = store.spent("global", llm::budgetDay(options.budget.timezone, now_ms));
  if (!spent.available) {
    err << "assay: budget.store " << store.describe() << " does not answer: no call made\n";
    return 2;
  }
  const double used = spent.spent_eur + spent.outstanding_eur;
  const double left = options.budget.daily_limit_eur - used;
  if (estimate_eur <= left) return std::nullopt;
  err << "assay: the estimate, €" << estimate_eur << ", is above what is left of today's "
      << "budget (budget.daily_limit_eur €" << options.budget.daily_limit_eur << " − €" << used
      << " spent or reserved = €" << left << "): no call made\n";
  return 3;
}

/// A progress bar on stderr (a terminal only).
std::function<void(std::size_t, std::size_t, double)> progressBar() {
  auto mu = std::make_shared<std::mutex>();
  return [mu](std::size_t done, std::size_t total, double eur) {
    std::lock_guard lock(*mu);
    const std::size_t width = 30, filled = total ? std::min(width, done * width / total) : width;
    std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
              << done << "/" << total << " calls  €" << std::fixed << std::setprecision(4) << eur
              << std::flush;
    std::cerr.unsetf(std::ios::fixed);
  };
}

/// The reports, and the exit code of a finished run.
int report(const Flags& f, const bakeoff::ReportInput& report, std::ostream& out,
           std::ostream& err) {
  const auto& result = report.result;
  out << bakeoff::markdownReport(report);
  bool written = true;
  if (!f.json.empty()) written = writeFile(f.json, bakeoff::jsonReport(report), err) && written;
  if (!f.html.empty()) written = writeFile(f.html, bakeoff::htmlReport(report), err) && written;
  if (result.calls.empty()) {
    err << "assay: no judge call succeeded (" << result.judge_failures
        << " failed; the JSON report lists their errors)\n";
    return 1;
  }
  if (result.judge_failures || result.generation_failures) {
    err << "assay: " << result.generation_failures << " generation(s) and " << result.judge_failures
        << " judge call(s) failed: the report covers the rest (the JSON lists the errors)\n";
    return 1;
  }
  return written ? 0 : 1;
}

}  // namespace

int runBakeoffCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags f;
  if (const auto why = parseFlags(args, f)) return usageError(*why, err);
  const auto load = bakeoff::loadBakeoff(f.config);
  for (const auto& w : load.warnings) err << "warning: " << w.format() << "\n";
  for (const auto& e : load.errors) err << e.format() << "\n";
  if (!load.ok()) return 2;
  const auto& config = load.config;
  bakeoff::RunOptions options;
  if (const auto code = readBudget(f, options, err)) return *code;
  options.history_path = f.history.empty() ? bakeoff::defaultHistoryPath() : f.history;
  options.seed = f.seed ? *f.seed : config.seed ? *config.seed : std::random_device{}();
  bakeoff::Estimate estimate;
  try {
    estimate = bakeoff::estimate(config, options.prices, options.budget.usd_to_eur,
                                 bakeoff::UsageHistory::load(options.history_path));
  } catch (const std::exception& e) {
    err << e.what() << "\n";
    return 2;
  }
  printEstimate(estimate, err);
  try {
    bakeoff::readApiKeys(config);
  } catch (const std::exception& e) {
    err << (f.dry_run ? "warning: " : "") << e.what() << "\n";
    if (!f.dry_run) return 2;
  }
  if (f.max_cost_eur && estimate.eur > *f.max_cost_eur) {
    err << "assay: the estimate, €" << estimate.eur << ", is above --max-cost-eur "
        << *f.max_cost_eur << ": no call made\n";
    return 3;
  }
  std::unique_ptr<llm::BudgetStore> store;
  try {
    store = llm::makeBudgetStore(options.budget.store, options.budget.key_prefix,
                                 options.budget.store_password);
  } catch (const std::exception& e) {
    err << "assay: budget.store: " << e.what() << "\n";
    return 2;
  }
  if (const auto code = checkBudgetLeft(options, *store, estimate.eur, err)) return *code;
  if (f.dry_run) return 0;
  const bool tty = f.progress && ::isatty(STDERR_FILENO);
  if (tty) options.progress = progressBar();
  bakeoff::RunResult result;
  try {
    llm::Ledger ledger(std::move(store));  // the calls' money, as the judges' (ledger.hpp)
    result = bakeoff::runBakeoff(config, options, ledger);
  } catch (const std::exception& e) {
    err << "assay: " << e.what() << "\n";
    return 2;
  }
  if (tty) std::cerr << "\n";
  return report(f, {config, result, estimate, options.seed, options.budget.usd_to_eur}, out, err);
}

}  // namespace assay::cli
