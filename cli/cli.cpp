#include "cli/cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ostream>

#include "cli/ab_command.hpp"
#include "cli/backfill.hpp"
#include "cli/bakeoff.hpp"
#include "cli/calibrate.hpp"
#include "cli/cli_text.hpp"
#include "cli/estimate.hpp"
#include "cli/report.hpp"
#include "cli/show_prompt.hpp"
#include "config/loader.hpp"
#include "core/clock.hpp"

namespace assay::cli {

namespace {

constexpr std::string_view kExitCodes =
    "exit codes: 0 done, 2 bad arguments, unreadable file, unpriced model or no usable row\n";

constexpr std::string_view kBackfillExitCodes =
    "exit codes: 0 done (or the estimate only), 1 a run-time failure (broker, sink) or verdicts\n"
    "that failed (provider, budget: the outcomes lines say which), 2 bad arguments, an invalid\n"
    "configuration, an unpriced model or an estimate above --max-cost-eur\n";

constexpr std::string_view kOverview =
    R"(usage: assay report --judgments FILE [--events FILE] [options]
       assay calibrate --input FILE [options]
       assay calibrate --judgments FILE --judge NAME (--events FILE | --feedback FILE |
                       --input FILE) [options]
       assay estimate (--requests-per-second R | --requests-per-day N)
                      (--config ASSAYD.yaml | --sample-rate S --judge MODEL...) [options]
       assay bakeoff --config BAKEOFF.yaml [--json FILE] [--html FILE] [options]
       assay backfill --config ASSAYD.yaml --from TIME [--to TIME] [--judge NAME]... [--rate R]
                      [--yes | --max-cost-eur X] [options]
       assay prompt --config ASSAYD.yaml [--judge NAME]... [--events FILE [--id ID]] [--body]
       assay ab status --config ASSAYD.yaml [--experiment NAME]
       assay ab reset --config ASSAYD.yaml --experiment NAME --yes
       assay --version
       assay COMMAND --help     that command's usage and options

report    summarise assayd's judgments file (sinks.jsonl.path): per judge the outcomes and
          score distribution, leniency, drift, agreement between judges and with human labels,
          ROC AUC against a boolean label
calibrate a judge's scores against human scores on the same items, and a verdict: usable,
          rework the rubric, too lenient (docs/calibration.md)
estimate  what LLM judges would cost per day and month, in USD and EUR
backfill  judge past traffic: the events topic between two times, the estimate first, then
          the judges under the daily budget; judgments say "backfill": true (docs/backfill.md)
bakeoff   compare prompts, models or workflows on the same inputs with 2 or 3 LLM judges
          scoring side by side: consensus with 95 % intervals, judges' agreement, position
          audit (docs/bakeoff.md)
ab        the A/B experiments in the shared store: their tables, p-values and recorded
          decisions (status), and the one way to undo a decision (reset) (docs/ab.md)
prompt    the request each LLM judge of assayd's configuration sends for one event (a custom
          criterion's rubric as the model reads it), without calling the provider
Each command's usage and options follow; `assay COMMAND --help` prints one of them.
)";

constexpr std::string_view kReport =
    R"(usage: assay report --judgments FILE [--events FILE] [--label POINTER]
                    [--group POINTER] [--auc JUDGE]... [--human POINTER]
                    [--human-criterion NAME] [--config ASSAYD.yaml]
                    [--cascade JUDGE]... [--recall R] [--price-per-call EUR]
                    [--half A|B] [--across-versions]

Summarises a judgments JSON Lines file (what assayd writes to sinks.jsonl.path; the last
judgment of each id): per judge the outcomes and score distribution; leniency, drift and the
agreement between judges of one criterion, with the tracking settings of --config (default:
the daemon's defaults). A judge whose verdicts come from more than one version (its
judge_version: a rubric, model or option that changes scores was edited) is summarised per
version, as NAME@VERSION, with the fields that changed; no statistic mixes two versions unless
--across-versions is given. An empty file (nothing judged yet) prints "judgments: none yet" and
exits 0; a file with lines but no judgment is an error (2).

  --judgments FILE         the judgments file (required)
  --events FILE            JSON Lines events carrying human labels, joined by id; with it:
  --auc JUDGE              ROC AUC of this judge for the boolean label (repeatable; default
                           context_overlap and claim_support, where present), overall
                           and per --group
  --cascade JUDGE          escalation table of JUDGE (run_if: below T): the share of events
                           sent on to the LLM and the recall of the label among them, at ten
                           thresholds and at the lowest one reaching --recall (repeatable)
  --recall R               the recall the cascade threshold must reach (default 0.9)
  --price-per-call EUR     the LLM judge's price per call (assay estimate gives it): the
                           cascade table adds the euros per hallucination caught
  --half A|B               the label sections (judge vs human, AUC, cascade) on the labelled
                           events of one half only: A = XXH3_64(id) < 2^63 (those sampling.rate
                           0.5 samples), B = the others; distributions, leniency, drift and
                           agreement between judges stay on every judgment
  --label POINTER          the boolean label (default /labels/hallucinated)
  --group POINTER          AUC per value of this label (default /labels/source_dataset; "" = none)
  --human POINTER          a numeric human score: Spearman and Kendall tau-b of every judge of
                           --human-criterion with it (default /labels/faithfulness; "" = none)
  --human-criterion NAME   (default faithfulness)
  --config ASSAYD.yaml     take tracking.* (leniency, drift windows) from assayd's configuration
  --across-versions        pool each judge's versions in one summary (the versions line names
                           them)
)";

constexpr std::string_view kBackfill =
    R"(usage: assay backfill --config ASSAYD.yaml --from TIME [--to TIME] [--judge NAME]...
                      [--rate R] [--yes | --max-cost-eur X] [--output FILE]
                      [--input-tokens N] [--replay FILE]

Judges past traffic of assayd's events topic (kafka.topic of ASSAYD.yaml). The range is found
with the offsets-for-times lookup of every partition; the consumer joins no group and commits
nothing, so the live consumer group is never touched. First the estimate: events in range,
the share sampled, and per judge the calls and euros at synchronous prices and at the
providers' batch prices (half the list price). Then, with --yes or --max-cost-eur, the judges
run; every LLM call goes through the daily budget (budget.*) like assayd's; every judgment
carries "backfill": true. A progress bar (rate, time left) goes to standard error when it is a
terminal.

  --config ASSAYD.yaml     brokers, topic, format, judges, budget and sinks (required)
  --from TIME, --to TIME   RFC 3339 (2026-11-30T08:00:00Z) or a duration back from now: 90s,
                           30m, 12h, 7d, 2w; --to defaults to now
  --judge NAME             only these configured judges (repeatable; default every judge),
                           with the judges their run_if reads, in configuration order
  --rate R                 the sampling rate, (0, 1] (default sampling.rate; sampling.rules
                           are then ignored)
  --yes                    proceed after the estimate
  --max-cost-eur X         proceed only if the estimate (each judge at its own price: batch
                           for batch: true) is at most X euros; above, refuse (exit 2)
  --output FILE            write the judgments to this JSON Lines file instead of the
                           configuration's sinks (no results topic)
  --input-tokens N         prompt tokens per LLM call for the estimate (default 800)
  --replay FILE            first produce FILE into the topic (kafka.brokers: embedded, a demo)
)";

constexpr std::string_view kCalibrate =
    R"(usage: assay calibrate --input FILE [--format csv|jsonl] [--item COL[,COL]...]
                       [--judge COL] [--human COL]... [--annotator COL]
                       [--levels A,B,...] [options]
       assay calibrate --judgments FILE --judge NAME
                       (--events FILE [--human POINTER]... | --feedback FILE |
                        --input FILE [--item COL] [--human COL]... [--annotator COL])
                       [options]
options: [--min-score X] [--max-score Y] [--leniency-max-ratio R] [--min-samples N]
         [--judge-version V | --across-versions]

Compares a judge's scores with human scores on the same items (docs/calibration.md): Spearman
(with p) and Kendall tau-b judge vs the mean human score per item and vs each annotation, exact
agreement, Cohen's kappa judge-human and between annotators, the score distributions, and a
verdict: usable, rework the rubric (annotator kappa < 0.6, Spearman < 0.5 or p >= 0.05) or too
lenient (top-score share > --leniency-max-ratio over at least --min-samples items).

A table (--input alone): a CSV or JSON Lines file with one row per item (wide) or, with
--annotator, one row per item and annotator (long).
  --input FILE             the table; --format csv|jsonl (default: from the extension)
  --item COL[,COL]...      the column(s) naming the item, joined (default item)
  --judge COL              the judge's score (default judge_score)
  --human COL              repeatable; wide: one column per human (default: every human*
                           column); long: the one column with the annotator's score
  --annotator COL          long format: the column naming the annotator
  --levels A,B,...         text scores mapped to 1..k in this order

assayd's judgments (--judgments): the judge's scores come from the judgments file (the last
judgment of each id, as assay report reads it), an item is an event id, and the scale is the
judge's own (its verdicts' min and max) unless --min-score/--max-score say otherwise. The human
scores come from one of:
  --events FILE            JSON Lines events; each --human is a JSON Pointer to a number in
                           them (default /labels/CRITERION, the judge's criterion)
  --feedback FILE          feedback events (docs/events.md): the annotations of the judge's
                           criterion, one per annotator (long format)
  --input FILE             a table as above whose --item column (default id) holds the event id
Events, annotations and rows of ids the judge has no verdict for are left out and counted.
A calibration is of one version of the judge (judge_version, docs/judge-versions.md): verdicts
of more than one version are an error naming them and the fields that changed, unless
  --judge-version V        keeps the verdicts of version V only, or
  --across-versions        pools them.

  --min-score X, --max-score Y   the scale (default: the file's range, or the judge's own)
  --leniency-max-ratio R   too lenient above this top-score share (default 0.8)
  --min-samples N          ...over at least N items (default 100)
)";

constexpr std::string_view kEstimate =
    R"(usage: assay estimate (--requests-per-second R | --requests-per-day N)
                      --sample-rate S --judge MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]...
                      [--usd-to-eur X] [--price MODEL=IN/CACHED/OUT]...
                      [--escalation-share S]
       assay estimate (--requests-per-second R | --requests-per-day N) --config ASSAYD.yaml
                      [--input-tokens N | --events FILE] [--sample-rate S] [--judge ...]...
                      [--usd-to-eur X]
                      [--price ...]... [--escalation-share S]

Prints the projected LLM-judge cost: per judge and in total, calls per day and cost per call,
per day and per 30-day month in USD and EUR, then the prices used. A judge sees requests/day x
sample rate x its RATE calls a day. No prompt-cache discount is assumed.

  --requests-per-second R, --requests-per-day N   the traffic (one of them, required)
  --sample-rate S          the share of requests sampled, [0, 1]
  --judge MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]   repeatable; RATE default 1, tokens per
                           call default 800/200
  --usd-to-eur X           default 0.92
  --price MODEL=IN/CACHED/OUT   USD per million tokens (IN/OUT without a cached rate); sets or
                           overrides a model's price
  --config ASSAYD.yaml     take from assayd's configuration its LLM judges (kind: llm: model,
                           rate, max_tokens as the output tokens per call), sampling.rate,
                           budget.usd_to_eur and budget.prices, and compare the projection with
                           budget.daily_limit_eur and each judge's daily_limit_eur. A flag given
                           as well wins: --sample-rate, --usd-to-eur, --price (over
                           budget.prices), --judge (replaces the config's judges)
  --input-tokens N         with --config: prompt tokens per call for the event's material
                           (question, contexts, answer; default 800), added to each judge's
                           system prompt, which is counted from its rubric
  --events FILE            with --config, instead of --input-tokens: each judge's prompts
                           built by its own code on these events (JSON Lines, docs/events.md):
                           tokens in = their median, and calls only for the share of events
                           the judge would call (the others lack an input its rubric needs)
  --escalation-share S     the share of sampled events a cascade sends on to the LLM (what
                           the report command's --cascade JUDGE prints), in (0, 1]: the rate
                           of every --judge, or of the configured judges with a run_if, is
                           multiplied by it, and the euros the cascade saves are printed
)";

constexpr std::string_view kPrompt =
    R"(usage: assay prompt --config ASSAYD.yaml [--judge NAME]... [--events FILE [--id ID]]
                    [--body]

Prints the request each LLM judge (kind: llm) of assayd's configuration would send for one
event, built by the judge's own code and sent nowhere: its endpoint URL, the prompt's estimated
tokens and the most one call can cost, the system message (the rubric: definition, levels,
examples), the user message (the event's inputs between the data markers) and the reply
schema. The event is read with the configuration's event fields and redacted as assayd
redacts it. Nothing is called and no key is needed.

  --config ASSAYD.yaml     assayd's configuration (required)
  --judge NAME             only this LLM judge (repeatable; default every one)
  --events FILE            JSON Lines in the event format (docs/events.md): the first event
                           that parses (default: a sample event with a placeholder in every
                           field, JSON Pointer inputs included)
  --id ID                  with --events: the event of that id
  --body                   the request bodies exactly as sent, one JSON document per line
)";

constexpr std::string_view kAb =
    R"(usage: assay ab status --config ASSAYD.yaml [--experiment NAME]
       assay ab reset --config ASSAYD.yaml --experiment NAME --yes

The experiments of assayd's configuration (ab.experiments) as the shared store (budget.store,
redis://) holds them for every instance (docs/ab.md).

status   per experiment: the ratings and mean stars per arm, the anytime-valid and chi-square
         p-values on them, whether the rule holds now, and the recorded decision (winner, rule,
         p, time, the ratings then and since). A recorded decision is final: later ratings
         never re-decide it.
reset    starts the experiment again: its table (ratings, sequential test) and its decision are
         archived in the store (PREFIXab:{NAME}:TAG:table:reset:MS) and an empty run begins;
         the running instances log the reset and split units again within a second. Rating
         ids already counted stay counted. Needs --yes.

  --config ASSAYD.yaml     assayd's configuration (required): ab, budget.store, key prefix
  --experiment NAME        one experiment (required by reset; default every one)
  --yes                    reset without asking
With budget.store: memory each process holds its own tables: restarting assayd resets them.
)";

/// A usage error: the message and where the usage is, not the whole usage text.
int usage(const std::string& command, const std::string& msg, std::ostream& err) {
  err << "assay: " << msg << "\n(assay " << (command.empty() ? "" : command + " ")
      << "--help prints the usage)\n";
  return 2;
}

/// `assay report ARGS`: the options, or a usage error (2) / help (0) as the exit code.
int runReportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ReportOptions o;
  static const std::vector<std::string> kFlags = {
      "--judgments",       "--events", "--label",   "--group",  "--auc",  "--human",
      "--human-criterion", "--config", "--cascade", "--recall", "--half", "--price-per-call"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--across-versions") {  // the one flag without a value
      o.across_versions = true;
      continue;
    }
    if (std::find(kFlags.begin(), kFlags.end(), a) == kFlags.end())
      return usage("report", "unknown argument '" + a + "'", err);
    if (i + 1 >= args.size()) return usage("report", a + " needs a value", err);
    const std::string& v = args[++i];
    if (a == "--judgments") {
      o.judgments_path = v;
    } else if (a == "--events") {
      o.events_path = v;
    } else if (a == "--label") {
      o.label_pointer = v;
    } else if (a == "--group") {
      o.group_pointer = v;
    } else if (a == "--human") {
      o.human_pointer = v;
    } else if (a == "--human-criterion") {
      o.human_criterion = v;
    } else if (a == "--cascade") {
      o.cascade_judges.push_back(v);
    } else if (a == "--recall") {
      char* end = nullptr;
      o.cascade_recall = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.cascade_recall > 0 && o.cascade_recall <= 1))
        return usage("report", "--recall '" + v + "': expected a number in (0, 1]", err);
    } else if (a == "--price-per-call") {
      char* end = nullptr;
      const double price = std::strtod(v.c_str(), &end);
      // Decimal only: strtod also reads " 0.4" and "0x10" (16).
      if (end == v.c_str() || *end != '\0' || !(price >= 1e-9 && price <= 1000) ||
          v.find_first_not_of("0123456789.eE+-") != std::string::npos)
        return usage("report",
                     "--price-per-call '" + v + "': expected euros per LLM call in (0, 1000]", err);
      o.price_per_call = price;
    } else if (a == "--half") {
      if (v != "A" && v != "B") return usage("report", "--half '" + v + "': expected A or B", err);
      o.half = v;
    } else if (a == "--config") {
      const auto res = loadConfigFile(v);
      for (const auto& e : res.errors) err << e.format() << "\n";
      if (!res.ok()) return 2;
      o.tracking = res.config.tracking;
    } else {  // --auc
      if (!o.auc_given) o.auc_judges.clear(), o.auc_given = true;
      o.auc_judges.push_back(v);
    }
  }
  if (o.judgments_path.empty()) return usage("report", "--judgments FILE is required", err);
  if (o.price_per_call && o.cascade_judges.empty())
    return usage("report", "--price-per-call prices a cascade: give --cascade JUDGE too", err);
  for (const auto* p : {&o.label_pointer, &o.group_pointer, &o.human_pointer})
    if (!p->empty() && p->front() != '/')
      return usage("report", "'" + *p + "' is not a JSON Pointer", err);
  return runReport(o, out, err);
}

std::string_view exitCodesOf(std::string_view help) {
  if (help.data() == kAb.data() || help.data() == kBakeoffHelp.data())
    return {};  // their own, in their help
  return help.data() == kBackfill.data() ? kBackfillExitCodes : kExitCodes;
}

}  // namespace

std::string_view commandHelp(std::string_view command) {
  if (command == "report") return kReport;
  if (command == "calibrate") return kCalibrate;
  if (command == "estimate") return kEstimate;
  if (command == "bakeoff") return kBakeoffHelp;
  if (command == "backfill") return kBackfill;
  if (command == "prompt") return kPrompt;
  if (command == "ab") return kAb;
  return {};
}

int runAssay(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) return usage("", "a command is required", err);
  const std::string& cmd = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    // `assay help report` is `assay report --help`.
    const std::string_view help = rest.empty() ? std::string_view() : commandHelp(rest[0]);
    if (!help.empty()) {
      out << help << "\n" << exitCodesOf(help);
      return 0;
    }
    // The overview, then every command's help: the whole manual (the package's man page is
    // made of it).
    out << kOverview << "\n" << kExitCodes;
    for (const auto& section :
         {kReport, kCalibrate, kEstimate, kBakeoffHelp, kBackfill, kPrompt, kAb}) {
      out << "\n" << section;
      if (section.data() == kBackfill.data()) out << "\nassay backfill's " << kBackfillExitCodes;
    }
    return 0;
  }
  const std::string_view help = commandHelp(cmd);
  if (help.empty()) return usage("", "unknown command '" + cmd + "'", err);
  if (wantsHelp(rest)) {
    out << help << "\n" << exitCodesOf(help);
    return 0;
  }
  if (cmd == "report") return runReportCommand(rest, out, err);
  if (cmd == "bakeoff") return runBakeoffCommand(rest, out, err);
  if (cmd == "backfill") {
    BackfillOptions o;
    try {
      o = parseBackfillArgs(rest, epochMs());
    } catch (const std::invalid_argument& e) {
      return usage("backfill", e.what(), err);
    }
    return runBackfill(o, out, err);
  }
  if (cmd == "ab") {
    try {
      return runAbCommand(parseAbArgs(rest), out, err);
    } catch (const AbCommandError& e) {
      return usage("ab", e.what(), err);
    }
  }
  if (cmd == "prompt") {
    try {
      return runShowPrompt(parseShowPromptArgs(rest), out);
    } catch (const ShowPromptError& e) {
      return usage("prompt", e.what(), err);
    }
  }
  if (cmd == "estimate") {
    try {
      printEstimate(computeEstimate(parseEstimateArgs(rest)), out);
      return 0;
    } catch (const EstimateError& e) {
      return usage("estimate", e.what(), err);
    }
  }
  try {
    return runCalibrate(parseCalibrateArgs(rest), out, err);
  } catch (const CalibrateError& e) {
    return usage("calibrate", e.what(), err);
  }
}

}  // namespace assay::cli
