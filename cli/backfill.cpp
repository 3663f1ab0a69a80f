#include "cli/backfill.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "config/loader.hpp"
#include "core/clock.hpp"
#include "core/judgment.hpp"
#include "core/rfc3339.hpp"
#include "daemon/controller.hpp"
#include "daemon/pipeline.hpp"
#include "judges/llm/pricing.hpp"

namespace assay::cli {

namespace {

// The providers' batch APIs charge half the list price: OpenAI Batch API ("50% discount
// compared to synchronous APIs", https://platform.openai.com/docs/guides/batch, read
// 2026-11) and Anthropic Message Batches ("50% of standard API prices",
// https://docs.anthropic.com/en/docs/build-with-claude/batch-processing, read 2026-11).
constexpr double kBatchShare = 0.5;

std::string thousands(std::int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

std::string eur(double v) { return v < 0.01 ? fmt::format("{:.4f}", v) : fmt::format("{:.2f}", v); }

struct Planned {
  std::string judge, model;  // model empty: a local judge, free
  double rate = 1;
  double calls = 0, eur_sync = 0, eur_batch = 0;
  bool batch = false;   // batch: true: it pays eur_batch
  bool run_if = false;  // a run_if may skip some: calls is an upper bound
  double eurAsConfigured() const { return batch ? eur_batch : eur_sync; }
};

// The sampled share the estimate assumes: sampling.rate, or with sampling.rules (whose tenant
// and app only the events tell) the largest rate of any rule: never below what the run samples.
double estimateRate(const Config& c) {
  double r = c.sampling.rate;
  for (const auto& rule : c.sampling.rules) r = std::max(r, rule.rate);
  return r;
}

}  // namespace

std::optional<std::int64_t> parseBackfillTime(const std::string& text, std::int64_t now_ms) {
  if (text.empty()) return std::nullopt;
  if (text == "now") return now_ms;
  // A duration back from now: digits and one unit.
  std::size_t n = 0;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
  if (n > 0 && n + 1 == text.size() && n <= 9) {
    const std::int64_t v = std::stoll(text.substr(0, n));
    std::int64_t unit = 0;
    switch (text[n]) {
      case 's':
        unit = 1000;
        break;
      case 'm':
        unit = 60'000;
        break;
      case 'h':
        unit = 3'600'000;
        break;
      case 'd':
        unit = 86'400'000;
        break;
      case 'w':
        unit = 7 * 86'400'000LL;
        break;
      default:
        return std::nullopt;
    }
    constexpr std::int64_t kCenturyMs = 100LL * 366 * 86'400'000;  // Kafka is younger
    if (v * unit > kCenturyMs) return std::nullopt;
    return now_ms - v * unit;
  }
  return parseRfc3339(text);
}

BackfillOptions parseBackfillArgs(const std::vector<std::string>& args, std::int64_t now_ms) {
  BackfillOptions o;
  o.to_ms = now_ms;
  bool from_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--yes") {
      o.yes = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + a + "'");
    if (i + 1 >= args.size()) throw std::invalid_argument(a + " needs a value");
    const std::string& v = args[++i];
    const auto number = [&](double lo, double hi) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(x >= lo && x <= hi))
        throw std::invalid_argument(a + " '" + v + "': expected a number in [" +
                                    fmt::format("{}", lo) + ", " + fmt::format("{}", hi) + "]");
      return x;
    };
    if (a == "--config") {
      o.config_path = v;
    } else if (a == "--from" || a == "--to") {
      const auto t = parseBackfillTime(v, now_ms);
      if (!t)
        throw std::invalid_argument(a + " '" + v +
                                    "': expected an RFC 3339 time (2026-11-30T08:00:00Z) or a "
                                    "duration back from now (30m, 12h, 7d, 2w; at most 100 "
                                    "years)");
      (a == "--from" ? o.from_ms : o.to_ms) = *t;
      from_given = from_given || a == "--from";
      o.to_given = o.to_given || a == "--to";
    } else if (a == "--judge") {
      if (std::find(o.judges.begin(), o.judges.end(), v) == o.judges.end()) o.judges.push_back(v);
    } else if (a == "--rate") {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(x > 0 && x <= 1))
        throw std::invalid_argument("--rate '" + v + "': expected a number in (0, 1]");
      o.rate = x;
    } else if (a == "--max-cost-eur") {
      o.max_cost_eur = number(0, 1e9);
    } else if (a == "--replay") {
      o.replay_file = v;
    } else if (a == "--output") {
      o.output = v;
    } else if (a == "--input-tokens") {
      o.input_tokens = static_cast<std::int64_t>(number(1, 10'000'000));
    } else {
      throw std::invalid_argument("unknown argument '" + a + "'");
    }
  }
  if (o.config_path.empty()) throw std::invalid_argument("--config ASSAYD.yaml is required");
  if (!from_given) throw std::invalid_argument("--from is required (e.g. --from 7d)");
  if (o.from_ms >= o.to_ms)
    throw std::invalid_argument(fmt::format("--from ({}) is not before --to ({})",
                                            formatRfc3339(o.from_ms), formatRfc3339(o.to_ms)));
  return o;
}

namespace {

// The configuration the backfill runs with: the selected judges, the rate, its own admin port
// and, with --output, its own JSON Lines file and no results topic.
Config backfillConfig(const BackfillOptions& o, Config c, std::vector<std::string>& added) {
  if (!o.judges.empty()) {
    std::set<std::string> keep;
    for (const auto& name : o.judges) {
      if (std::none_of(c.judges.begin(), c.judges.end(),
                       [&](const JudgeConfig& j) { return j.name == name; })) {
        std::string known;
        for (const auto& j : c.judges) known += (known.empty() ? "" : ", ") + j.name;
        throw std::invalid_argument("--judge " + name + ": no judge of that name in " +
                                    o.config_path + " (" + known + ")");
      }
      keep.insert(name);
    }
    // A run_if needs the judges it reads (and theirs): they run too, as in the daemon. The
    // configuration's order is kept, since a run_if reads judges listed before it.
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& j : c.judges)
        if (keep.count(j.name))
          for (const auto& cond : j.run_if)
            if (keep.insert(cond.judge).second) {
              added.push_back(cond.judge + " (" + j.name + "'s run_if reads it)");
              grew = true;
            }
    }
    std::erase_if(c.judges, [&](const JudgeConfig& j) { return !keep.count(j.name); });
  }
  if (o.rate) {
    c.sampling.rate = *o.rate;
    c.sampling.rules.clear();
  }
  // The range is read at full speed: a batch judge's last, partial batch is sent 5 s after its
  // first request rather than after the live daemon's batch_max_wait_ms (10 min by default).
  for (auto& j : c.judges)
    if (j.values.getBool("batch", false) && j.values.getInt("batch_max_wait_ms", 600000) > 5000)
      j.values.set("batch_max_wait_ms", std::int64_t{5000});
  c.admin.listen = "127.0.0.1:0";  // never the live daemon's port
  if (!o.output.empty()) {         // that file only: every configured sink is off
    SinksOptions only;
    only.queue_capacity = c.sinks.queue_capacity;
    only.when_full = c.sinks.when_full;
    only.jsonl_enabled = true;
    only.jsonl.path = o.output;
    c.sinks = only;
    c.kafka.results_topic.clear();
  }
  return c;
}

std::vector<Planned> plan(const Config& c, double events, std::int64_t input_tokens) {
  const auto table = [&] {
    auto t = llm::PriceTable::builtin();
    for (const auto& p : c.budget.prices)
      t.set(p.model, llm::ModelPrice{p.input, p.cached_input, p.output, p.cache_write});
    return t;
  }();
  std::vector<Planned> out;
  for (const auto& j : c.judges) {
    Planned p;
    p.judge = j.name;
    p.rate = j.rate;
    p.calls = events * estimateRate(c) * j.rate;
    p.run_if = !j.run_if.empty();
    if (j.factory->descriptor->kind == JudgeKind::kLlm) {
      p.model = j.values.getString("model", "");
      const auto match = table.match(p.model);
      if (!match)
        throw std::invalid_argument("judge " + j.name + ": no price for model '" + p.model +
                                    "' (budget.prices)");
      llm::TokenUsage usage;
      usage.prompt_tokens = input_tokens;
      usage.completion_tokens = j.values.getInt("max_tokens", 300);
      const double per_call = llm::costEur(llm::costUsd(match->price, usage), c.budget.usd_to_eur);
      p.eur_sync = p.calls * per_call;
      p.eur_batch = p.eur_sync * kBatchShare;
      p.batch = j.values.getBool("batch", false);
    }
    out.push_back(std::move(p));
  }
  return out;
}

void printPlan(const BackfillOptions& o, const Config& c, std::int64_t events,
               const std::vector<Planned>& rows, std::ostream& out) {
  out << fmt::format("backfill of '{}' from {} to {}\n", c.kafka.topic, formatRfc3339(o.from_ms),
                     formatRfc3339(o.to_ms));
  out << fmt::format("events in range: {} (from the offsets of every partition)\n",
                     thousands(events));
  const double rate = estimateRate(c);
  if (rate > c.sampling.rate)
    out << fmt::format(
        "sampled: rate {}, up to {} by sampling.rules (tenant and app are only known from the "
        "events) -> at most {} events\n",
        c.sampling.rate, rate, thousands(std::llround(static_cast<double>(events) * rate)));
  else
    out << fmt::format("sampled: rate {} -> about {} events\n", c.sampling.rate,
                       thousands(std::llround(static_cast<double>(events) * rate)));
  out << fmt::format("{:<24} {:<28} {:>6} {:>14} {:>12} {:>12}\n", "judge", "model", "rate",
                     "calls", "EUR sync", "EUR batch");
  double sync = 0, batch = 0, configured = 0;
  bool any_run_if = false, any_batch = false;
  for (const auto& r : rows) {
    out << fmt::format(
        "{:<24} {:<28} {:>6} {:>14} {:>12} {:>12}\n", r.judge + (r.batch ? " (batch)" : ""),
        r.model.empty() ? "(local, free)" : r.model, r.rate,
        (r.run_if ? "at most " : "about ") + thousands(std::llround(r.calls)),
        r.model.empty() ? "-" : eur(r.eur_sync), r.model.empty() ? "-" : eur(r.eur_batch));
    sync += r.eur_sync;
    batch += r.eur_batch;
    configured += r.eurAsConfigured();
    any_run_if = any_run_if || (r.run_if && !r.model.empty());
    any_batch = any_batch || r.batch;
  }
  out << fmt::format(
      "total: EUR {} at synchronous prices, EUR {} at batch prices (half the "
      "list price){}\n",
      eur(sync), eur(batch),
      any_batch ? fmt::format("; as configured (batch: true judges at batch prices): EUR {}",
                              eur(configured))
                : "");
  if (any_run_if)
    out << "a judge with run_if is counted on every sampled event: the calls it skips cost "
           "nothing\n";
  if (c.budget.daily_limit_eur > 0)
    out << fmt::format("budget.daily_limit_eur {} applies to every call{}\n",
                       eur(c.budget.daily_limit_eur),
                       configured > c.budget.daily_limit_eur
                           ? ": the estimate is above it, so the calls beyond the cap end "
                             "skipped_budget (today's live spend counts too)"
                           : "");
  out << fmt::format(
      "input tokens per LLM call: {} (--input-tokens), output: each judge's "
      "max_tokens\n",
      o.input_tokens);
}

// Per judge, its verdicts by outcome (assay_judge_runs_total), and how many failed for a reason
// that is not the event's (the provider, the budget, the judge itself).
std::pair<std::string, std::int64_t> outcomeSummary(prometheus::Registry& registry) {
  static const std::set<std::string> kFailures = {"schema_error",   "truncated",   "refused",
                                                  "rate_limited",   "timeout",     "provider_error",
                                                  "skipped_budget", "judge_error", "auth_error"};
  std::map<std::string, std::map<std::string, std::int64_t>> by_judge;
  for (const auto& family : registry.Collect()) {
    if (family.name != "assay_judge_runs_total") continue;
    for (const auto& m : family.metric) {
      std::string judge, outcome;
      for (const auto& l : m.label) {
        if (l.name == "judge") judge = l.value;
        if (l.name == "outcome") outcome = l.value;
      }
      const auto n = static_cast<std::int64_t>(m.counter.value);
      if (n > 0) by_judge[judge][outcome] += n;
    }
  }
  std::string text;
  std::int64_t failed = 0;
  for (const auto& [judge, outcomes] : by_judge) {
    text += "outcomes of " + judge + ":";
    for (const auto& [outcome, n] : outcomes) {
      text += " " + outcome + " " + thousands(n);
      if (kFailures.count(outcome)) failed += n;
    }
    text += "\n";
  }
  return {text, failed};
}

void progress(std::int64_t done, std::int64_t total, double seconds, std::FILE* tty) {
  const int width = 30;
  const double share = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
  const int filled = static_cast<int>(share * width);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const std::string eta =
      rate > 0 ? fmt::format("{:.0f} s", static_cast<double>(total - done) / rate) : "?";
  std::fprintf(tty, "\r[%s%s] %s / %s events  %.0f events/s  ETA %s   ",
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(width - filled), '.').c_str(),
               thousands(done).c_str(), thousands(total).c_str(), rate, eta.c_str());
  std::fflush(tty);
}

}  // namespace

namespace {

/// The outcomes' lines, what failed, and the exit code: 0 when every event of the range was
/// read, every verdict scored and every judgment written, else 1.
int finishedCode(Pipeline& p, bool all_read, std::ostream& out, std::ostream& err) {
  const auto [summary, failed] = outcomeSummary(p.registry());
  out << summary;
  if (failed > 0)
    err << fmt::format(
        "assay backfill: {} verdict(s) ended without a score because of the provider, the "
        "budget or the judge (outcomes above); a rerun of the range pays only for those\n",
        thousands(failed));
  const auto sinks = p.sinkStats().troubles();
  if (!sinks.text.empty())
    err << "assay backfill: not every judgment was written: " << sinks.text << "\n";
  return all_read && failed == 0 && sinks.text.empty() ? 0 : 1;
}

}  // namespace

int runBackfill(BackfillOptions o, std::ostream& out, std::ostream& err) {
  const LoadResult loaded = loadConfigFile(o.config_path);
  if (!loaded.ok()) {
    err << "assay backfill: " << loaded.refusal() << "\n";
    return 2;
  }
  Config config;
  std::vector<Planned> rows;
  std::vector<std::string> added;
  try {
    config = backfillConfig(o, loaded.config, added);
  } catch (const std::invalid_argument& e) {
    err << "assay backfill: " << e.what() << "\n";
    return 2;
  }
  RunOptions run;
  run.backfill = true;
  run.replay_file = o.replay_file;
  std::unique_ptr<Pipeline> p;
  std::vector<KafkaConsumer::Range> ranges;
  std::int64_t events = 0;
  try {
    p = std::make_unique<Pipeline>(config, run);
    p->replay();
    if (!o.to_given)  // "now" is when the range is planned: after --replay's messages
      o.to_ms = epochMs() + 1;
    ranges = p->source().planBackfill(o.from_ms, o.to_ms);
    for (const auto& r : ranges) events += r.to - r.from;
    rows = plan(config, static_cast<double>(events), o.input_tokens);
  } catch (const std::invalid_argument& e) {
    err << "assay backfill: " << e.what() << "\n";
    return 2;
  } catch (const ConfigurationError& e) {  // an unset API key variable, an unreadable key file
    err << "assay backfill: " << e.what() << "\n";
    return 2;
  } catch (const OptionError& e) {
    err << "assay backfill: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "assay backfill: " << e.what() << "\n";
    return 1;
  }
  for (const auto& a : added) out << "also running " << a << "\n";
  printPlan(o, config, events, rows, out);
  double configured = 0;
  for (const auto& r : rows) configured += r.eurAsConfigured();
  if (o.max_cost_eur && configured > *o.max_cost_eur) {
    out << std::flush;
    err << fmt::format(
        "assay backfill: refused: the estimate, EUR {}, is above --max-cost-eur {}; nothing "
        "was judged\n",
        eur(configured), eur(*o.max_cost_eur));
    p->shutdown();
    logExitSummary(*p);
    return 2;
  }
  if (!o.yes && !o.max_cost_eur) {
    out << "nothing judged: run again with --yes, or --max-cost-eur EUR to proceed within a "
           "limit\n";
    p->shutdown();
    logExitSummary(*p);
    return 0;
  }
  out << std::flush;
  p->source().startBackfill(ranges);
  const auto t0 = std::chrono::steady_clock::now();
  std::FILE* tty = ::isatty(STDERR_FILENO) ? stderr : nullptr;
  auto last_bar = t0;
  while (!p->backfillDone() && p->pollOnce(100)) {
    const auto now = std::chrono::steady_clock::now();
    if (tty && now - last_bar > std::chrono::milliseconds(250)) {
      last_bar = now;
      const auto [done, total] = p->source().backfillProgress();
      progress(done, total, std::chrono::duration<double>(now - t0).count(), tty);
    }
  }
  const auto [done, total] = p->source().backfillProgress();
  if (tty) {
    progress(done, total,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), tty);
    std::fputc('\n', tty);
  }
  p->shutdown();
  logExitSummary(*p);
  out << fmt::format(
      "backfill: {} of {} events read in {:.1f} s; judgments carry \"backfill\": "
      "true{}\n",
      thousands(done), thousands(total),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
      o.output.empty() ? "" : " (in " + o.output + ")");
  return finishedCode(*p, done == total, out, err);
}

}  // namespace assay::cli
