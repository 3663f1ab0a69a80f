#include "cli/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <ostream>
#include <string_view>

#include "cli/cli_text.hpp"
#include "config/loader.hpp"
#include "core/bounded_file.hpp"
#include "core/log_text.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/llm/prompt.hpp"
#include "judges/registry.hpp"
#include "sources/event_parser.hpp"

namespace assay {

namespace {

using cli::parseDouble;
using cli::split;

constexpr double kSecondsPerDay = 86400;

std::optional<std::int64_t> parseCount(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

double number(const std::string& flag, const std::string& value) {
  const auto v = parseDouble(value);
  if (!v) throw EstimateError(flag + " '" + value + "' is not a number");
  return *v;
}

// MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]. Fields are taken from the right, so a model name
// with a colon of its own ("llama3.1:8b") still parses.
EstimateJudge parseJudge(const std::string& spec) {
  const std::string form =
      "--judge '" + spec + "': expected MODEL[:RATE[:INPUT_TOKENS:OUTPUT_TOKENS]]";
  const std::vector<std::string> parts = split(spec, ':');
  std::size_t numeric = 0;  // trailing numeric fields, at most 3, never the first field
  while (numeric < 3 && numeric + 1 < parts.size() &&
         parseDouble(parts[parts.size() - 1 - numeric]))
    ++numeric;
  if (numeric == 2) throw EstimateError(form + " (give both token counts)");
  EstimateJudge j;
  const std::size_t model_fields = parts.size() - numeric;
  for (std::size_t i = 0; i < model_fields; ++i) j.model += (i ? ":" : "") + parts[i];
  if (j.model.empty()) throw EstimateError(form + " (empty model name)");
  if (numeric >= 1) {
    j.rate = *parseDouble(parts[model_fields]);
    if (!(j.rate > 0 && j.rate <= 1))
      throw EstimateError("--judge '" + spec + "': RATE must be in (0, 1]");
  }
  if (numeric == 3) {
    const auto in = parseCount(parts[model_fields + 1]);
    const auto out = parseCount(parts[model_fields + 2]);
    if (!in || !out)
      throw EstimateError("--judge '" + spec + "': token counts must be non-negative integers");
    j.input_tokens = *in;
    j.output_tokens = *out;
  }
  return j;
}

// MODEL=IN/CACHED/OUT[/CACHE_WRITE] or MODEL=IN/OUT, USD per million tokens.
std::pair<std::string, llm::ModelPrice> parsePrice(const std::string& spec) {
  const std::string form = "--price '" + spec +
                           "': expected MODEL=IN/CACHED/OUT[/CACHE_WRITE] (USD per million "
                           "tokens) or MODEL=IN/OUT";
  const std::size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) throw EstimateError(form);
  const std::vector<std::string> fields = split(std::string_view(spec).substr(eq + 1), '/');
  std::vector<double> v;
  for (const auto& f : fields) {
    const auto d = parseDouble(f);
    if (!d || *d < 0) throw EstimateError(form);
    v.push_back(*d);
  }
  llm::ModelPrice p;
  if (v.size() == 4)
    p = {v[0], v[1], v[2], v[3]};
  else if (v.size() == 3)
    p = {v[0], v[1], v[2], v[0] * llm::kDefaultCacheWriteMultiplier};
  else if (v.size() == 2)
    p = llm::uncachedPrice(v[0], v[1]);
  else
    throw EstimateError(form);
  return {spec.substr(0, eq), p};
}

}  // namespace

namespace {

/// The flags as given (nullopt / empty: not given).
struct EstimateFlags {
  std::optional<double> rps, rpd, sample, usd_to_eur, escalation;
  std::optional<std::int64_t> input_tokens;
  std::string events;  ///< --events: measure each configured judge's prompts on these events
  std::vector<EstimateJudge> judges;
  std::vector<std::pair<std::string, llm::ModelPrice>> prices;
  std::string config;
};

EstimateFlags readFlags(const std::vector<std::string>& args) {
  EstimateFlags f;
  static const std::vector<std::string> kFlags = {"--requests-per-second",
                                                  "--requests-per-day",
                                                  "--sample-rate",
                                                  "--judge",
                                                  "--usd-to-eur",
                                                  "--price",
                                                  "--config",
                                                  "--input-tokens",
                                                  "--events",
                                                  "--escalation-share"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find(kFlags.begin(), kFlags.end(), a) == kFlags.end())
      throw EstimateError("unknown argument '" + a + "'");
    if (i + 1 >= args.size()) throw EstimateError(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--requests-per-second")
      f.rps = number(a, v);
    else if (a == "--requests-per-day")
      f.rpd = number(a, v);
    else if (a == "--sample-rate")
      f.sample = number(a, v);
    else if (a == "--usd-to-eur")
      f.usd_to_eur = number(a, v);
    else if (a == "--judge")
      f.judges.push_back(parseJudge(v));
    else if (a == "--price")
      f.prices.push_back(parsePrice(v));
    else if (a == "--escalation-share")
      f.escalation = number(a, v);
    else if (a == "--events")
      f.events = v;
    else if (a == "--config")
      f.config = v;
    else if (!(f.input_tokens = parseCount(v)))
      throw EstimateError("--input-tokens '" + v + "' is not a non-negative integer");
  }
  return f;
}

/// A configured LLM judge's settings, as assayd builds them (nullopt when the options do not
/// build: the loader has said why).
std::optional<llm::LlmJudgeSettings> settingsOf(const JudgeConfig& jc, const Config& c) {
  JudgeContext ctx;
  ctx.name = jc.name;
  ctx.budget = &c.budget;
  try {
    return llm::llmSettingsFrom(jc.values, ctx);
  } catch (const OptionError&) {
    return std::nullopt;
  }
}

/// The events of `path` (JSON Lines in the configuration's event format; lines that are not
/// events are skipped), at most 100,000.
/// The events of `path` (the first 100,000); lines that are not events are counted in a note
/// naming the first, so that a projection does not silently rest on part of the file.
std::vector<Event> readEvents(const std::string& path, const Config& c,
                              std::vector<std::string>& notes) {
  std::string text;
  if (const auto why = readRegularFile(path, kMaxDataFileBytes, text); !why.empty())
    throw EstimateError("--events " + path + " " + why);
  const EventParser parser(c.events, c.limits.max_event_bytes);
  std::vector<Event> out;
  std::size_t start = 0, invalid = 0;
  std::string first;  // LINE: why
  for (std::size_t n = 1; start < text.size() && out.size() < 100'000; ++n) {
    const auto end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    Event e;
    const ParseOutcome po = parser.parse(line, "line-" + std::to_string(n), e);
    if (po.ok) {
      out.push_back(std::move(e));
    } else if (invalid++ == 0) {
      first = fmt::format("{}: {}", n, invalidReasonName(po.reason));
    }
  }
  if (out.empty()) throw EstimateError("--events " + path + ": no line is an event");
  if (invalid > 0)
    notes.push_back(
        fmt::format("--events {}: {} line(s) are not events and are left out (the "
                    "first at line {}); the shares come from the {} events",
                    path, invalid, first, out.size()));
  if (start < text.size())
    notes.push_back(
        fmt::format("--events {}: the first {} events are read; the rest of the file "
                    "is left out",
                    path, out.size()));
  return out;
}

/// Measures `j` on `events` with the judge's own prompt builder: the median prompt tokens of
/// the events it would call, and the share it would call; a note says what was measured.
void measure(EstimateJudge& j, const llm::LlmJudgeSettings& s, const std::vector<Event>& events,
             const std::string& path, std::vector<std::string>& notes) {
  std::vector<std::int64_t> tokens;
  std::map<std::string, std::size_t> skipped;
  for (const auto& e : events) {
    if (const auto missing = llm::missingInput(s.rubric, e)) {
      ++skipped[std::string(outcomeName(missing->first))];
    } else if (const auto p = llm::buildPrompt(s.rubric, e, s.max_input_tokens)) {
      tokens.push_back(p->estimated_tokens);
    } else {
      ++skipped["context_too_long"];
    }
  }
  j.called_share = static_cast<double>(tokens.size()) / static_cast<double>(events.size());
  if (!tokens.empty()) {
    std::nth_element(tokens.begin(), tokens.begin() + static_cast<long>(tokens.size() / 2),
                     tokens.end());
    j.input_tokens = tokens[tokens.size() / 2];
  }
  std::string why;
  for (const auto& [outcome, n] : skipped)
    why += fmt::format("{}{} {}", why.empty() ? "" : ", ", outcome, n);
  notes.push_back(fmt::format(
      "{}: measured on the {} events of {}: tokens in = the median prompt of the {} it would "
      "call ({:.0f} %){}",
      j.name, events.size(), path, tokens.size(), 100.0 * j.called_share,
      why.empty() ? "" : "; no call for " + why));
}

/// The `kind: llm` judges of a loaded configuration, and what the estimate cannot model.
/// A judge's input tokens per call: measured on `events` when given, else its system prompt's
/// (counted from its rubric) and the event's `event_tokens`.
void judgesFromConfig(const Config& c, std::int64_t event_tokens, double escalation,
                      const std::string& events_path, EstimateOptions& o) {
  std::string rubrics;
  const std::vector<Event> events =
      events_path.empty() ? std::vector<Event>{} : readEvents(events_path, c, o.notes);
  o.events_path = events_path;
  for (const auto& e : events) {  // each tenant's and app's share of the traffic
    o.tenant_shares[e.tenant.empty() ? "none" : e.tenant] +=
        1.0 / static_cast<double>(events.size());
    o.app_shares[e.app.empty() ? "none" : e.app] += 1.0 / static_cast<double>(events.size());
  }
  for (const JudgeConfig& jc : c.judges) {
    if (!jc.factory || jc.factory->descriptor->kind != JudgeKind::kLlm) continue;
    EstimateJudge j;
    j.name = jc.name;
    j.model = jc.values.getString("model", "");
    j.rate = jc.rate;
    const auto settings = settingsOf(jc, c);
    const std::int64_t system =
        settings ? llm::estimateTokens(llm::systemPrompt(settings->rubric)) : 0;
    j.input_tokens = system + event_tokens;
    if (settings && !events.empty())
      measure(j, *settings, events, events_path, o.notes);
    else
      rubrics += fmt::format("{}{} {}", rubrics.empty() ? "" : ", ", jc.name, system);
    j.output_tokens = jc.values.getInt("max_tokens", 300);
    j.daily_limit_eur = jc.values.getNumber("daily_limit_eur", 0);
    j.run_if = !jc.run_if.empty();
    j.batch = jc.values.getBool("batch", false);
    if (j.batch)
      o.notes.push_back(fmt::format(
          "{} has batch: true: priced at the providers' batch price ({} of the list price)", j.name,
          llm::kBatchPriceShare));
    if (j.run_if)
      o.notes.push_back(
          escalation < 1
              ? fmt::format("{} runs only when its run_if holds: its calls are counted at the "
                            "escalation share {}",
                            j.name, escalation)
              : fmt::format("{} runs only when its run_if holds: its calls are at most the "
                            "figure above (--escalation-share from assay report --cascade "
                            "counts them)",
                            j.name));
    o.judges.push_back(std::move(j));
  }
  if (!rubrics.empty())
    o.notes.push_back(fmt::format(
        "tokens in = the rubric's system prompt, counted from its text ({}), + {} for the "
        "event's material (--input-tokens)",
        rubrics, event_tokens));
  if (o.judges.empty())
    o.notes.push_back(o.config_path +
                      " has no LLM judge (kind: llm): its judges make no paid call");
  if (!c.sampling.rules.empty())
    o.notes.push_back(fmt::format(
        "sampling.rules ({} of them) are not modelled: every request is sampled at sampling.rate "
        "{}; give --sample-rate for your traffic's mix",
        c.sampling.rules.size(), c.sampling.rate));
}

/// Loads `f.config` into `o`: judges (unless --judge), sample rate, EUR rate, prices, caps.
void applyConfig(const EstimateFlags& f, EstimateOptions& o) {
  const LoadResult res = loadConfigFile(f.config);
  if (!res.ok()) throw EstimateError(res.refusal());
  const Config& c = res.config;
  o.config_path = f.config;
  if (f.judges.empty())
    judgesFromConfig(c, f.input_tokens.value_or(800), f.escalation.value_or(1), f.events, o);
  o.sample_rate = c.sampling.rate;
  o.usd_to_eur = c.budget.usd_to_eur;
  o.daily_limit_eur = c.budget.daily_limit_eur;
  o.tenant_caps = c.budget.tenant_caps;
  o.app_caps = c.budget.app_caps;
  for (const auto& p : c.budget.prices)
    o.prices.emplace_back(p.model,
                          llm::ModelPrice{p.input, p.cached_input, p.output, p.cache_write});
  o.config_prices = o.prices.size();
}

}  // namespace

EstimateOptions parseEstimateArgs(const std::vector<std::string>& args) {
  const EstimateFlags f = readFlags(args);
  EstimateOptions o;
  if (!f.config.empty()) applyConfig(f, o);
  if (!f.events.empty() && (f.config.empty() || !f.judges.empty() || f.input_tokens))
    throw EstimateError(
        "--events measures the judges of --config on real events (without --judge or "
        "--input-tokens)");
  if (f.input_tokens && (f.config.empty() || !f.judges.empty()))
    throw EstimateError(
        "--input-tokens applies to the judges of --config (a --judge gives its "
        "own: MODEL:RATE:INPUT_TOKENS:OUTPUT_TOKENS)");
  if (f.rps && f.rpd)
    throw EstimateError("give --requests-per-second or --requests-per-day, not both");
  if (!f.rps && !f.rpd)
    throw EstimateError("--requests-per-second R or --requests-per-day N is required");
  if ((f.rps && *f.rps < 0) || (f.rpd && *f.rpd < 0))
    throw EstimateError("the request rate must not be negative");
  o.requests_per_second = f.rps.value_or(0);
  o.requests_per_day = f.rpd ? *f.rpd : *f.rps * kSecondsPerDay;
  if (!f.sample && f.config.empty())
    throw EstimateError("--sample-rate S is required (the share of requests sampled)");
  if (f.sample) o.sample_rate = *f.sample;
  if (o.sample_rate < 0 || o.sample_rate > 1)
    throw EstimateError("--sample-rate must be in [0, 1]");
  if (!f.judges.empty()) {
    o.judges = f.judges;
    for (auto& j : o.judges) j.gated = true;  // a --judge is the cascade's LLM judge
  }
  if (o.judges.empty() && f.config.empty())
    throw EstimateError("at least one --judge MODEL is required (or --config ASSAYD.yaml)");
  if (f.usd_to_eur) o.usd_to_eur = *f.usd_to_eur;
  if (!(o.usd_to_eur > 0)) throw EstimateError("--usd-to-eur must be positive");
  if (f.escalation) {
    if (!(*f.escalation > 0 && *f.escalation <= 1))
      throw EstimateError("--escalation-share must be in (0, 1] (a share of the sampled events)");
    o.escalation_share = *f.escalation;
  }
  o.prices.insert(o.prices.end(), f.prices.begin(), f.prices.end());
  return o;
}

Estimate computeEstimate(const EstimateOptions& options, llm::PriceTable table) {
  for (const auto& [model, price] : options.prices) table.set(model, price);
  Estimate e;
  e.options = options;
  for (const EstimateJudge& j : options.judges) {
    const auto match = table.match(j.model);
    if (!match)
      throw EstimateError("no price for model '" + j.model + "': give one with --price " + j.model +
                          "=IN/CACHED/OUT (USD per million tokens)");
    EstimateRow r;
    r.judge = j;
    r.priced_as = match->name;
    // The last entry for the model wins, as in the table: --price comes after budget.prices.
    for (std::size_t i = 0; i < options.prices.size(); ++i)
      if (options.prices[i].first == match->name)
        r.price_source = i < options.config_prices ? "budget.prices" : "--price";
    r.price_overridden = r.price_source == "--price";
    r.price = j.batch ? llm::batchPrice(match->price) : match->price;
    llm::TokenUsage usage;
    usage.prompt_tokens = j.input_tokens;
    usage.completion_tokens = j.output_tokens;
    // A cascade gates the judges of --judge and the configured judges with a run_if.
    const bool gated = j.gated || j.run_if;
    const double share = gated ? options.escalation_share : 1.0;
    r.calls_per_day =
        options.requests_per_day * options.sample_rate * j.rate * share * j.called_share;
    r.usd_per_call = llm::costUsd(r.price, usage);
    r.usd_per_day = r.calls_per_day * r.usd_per_call;
    r.usd_per_month = kEstimateDaysPerMonth * r.usd_per_day;
    r.eur_per_call = llm::costEur(r.usd_per_call, options.usd_to_eur);
    r.eur_per_day = llm::costEur(r.usd_per_day, options.usd_to_eur);
    r.eur_per_month = llm::costEur(r.usd_per_month, options.usd_to_eur);
    e.calls_per_day += r.calls_per_day;
    e.usd_per_day += r.usd_per_day;
    e.usd_per_month += r.usd_per_month;
    e.eur_per_day += r.eur_per_day;
    e.eur_per_month += r.eur_per_month;
    e.eur_per_day_without_cascade += r.eur_per_day / share;
    e.eur_per_month_without_cascade += r.eur_per_month / share;
    e.rows.push_back(std::move(r));
  }
  return e;
}

namespace {

// Whole numbers print without decimals; others with up to 3, trailing zeros dropped.
std::string quantity(double v) {
  // Whole numbers, and any count of 100 or more, without decimals (88071.571 calls a day is
  // a false precision).
  if (std::abs(v - std::round(v)) < 1e-9 || std::abs(v) >= 100)
    return fmt::format("{:.0f}", std::round(v));
  std::string s = fmt::format("{:.3f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// Cents for amounts of a dollar or more; below that, four decimals so small daily costs
// (€0.3312) do not round to nothing.
std::string money(double v) {
  return v >= 1 || v == 0 ? fmt::format("{:.2f}", v) : fmt::format("{:.4f}", v);
}

std::string rate(double v) { return fmt::format("{}", v); }

// USD per million tokens: cents, or a tenth of a cent when the price has one (0.075, 0.025).
std::string perMtok(double v) {
  std::string s = fmt::format("{:.3f}", v);
  if (s.back() == '0') s.pop_back();
  return s;
}

void printTable(const std::vector<std::vector<std::string>>& rows, std::size_t left_columns,
                std::ostream& out) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      line += c < left_columns ? fmt::format("{:<{}}", row[c], width[c])
                               : fmt::format("{:>{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

}  // namespace

namespace {

std::string capText(double projected, double cap) {
  if (projected <= cap) return fmt::format("projected {} EUR/day: within it", money(projected));
  return fmt::format(
      "projected {} EUR/day: over it; the calls stop at the cap each day (outcome "
      "skipped_budget), after about {:.0f} % of them",
      money(projected), 100 * cap / projected);
}

/// budget.tenants (apps): each tenant's share of `total` euros a day (its share of the events
/// of --events, every event costing the same) against its cap; the tenants under "*" each
/// against that cap (the ten largest shown).
void printScopeCaps(const char* kind, const char* key,
                    const std::vector<std::pair<std::string, double>>& caps,
                    const std::map<std::string, double>& shares, double total,
                    const EstimateOptions& o, std::ostream& out) {
  if (caps.empty()) return;
  if (o.events_path.empty()) {
    out << fmt::format(
        "  budget.{}: {} cap(s); a per-{} projection needs --events FILE (each one's share of "
        "the traffic)\n",
        key, caps.size(), kind);
    return;
  }
  const auto capOf = [&](const std::string& name) -> std::optional<double> {
    std::optional<double> star;
    for (const auto& [k, v] : caps) {
      if (k == name) return v;
      if (k == "*" && !star) star = v;
    }
    return star;
  };
  std::vector<std::pair<double, std::string>> by_share;
  by_share.reserve(shares.size());
  for (const auto& [name, share] : shares) by_share.emplace_back(share, name);
  std::sort(by_share.rbegin(), by_share.rend());
  std::size_t shown = 0, uncapped = 0;
  std::string uncapped_names;  // the first five, by share
  for (const auto& [share, name] : by_share) {
    const auto cap = capOf(name);
    if (!cap) {
      if (++uncapped <= 5)
        uncapped_names += fmt::format("{}{} ({:.1f} %)", uncapped == 1 ? "" : ", ",
                                      logText(name.empty() ? "(none)" : name, 60), 100 * share);
      continue;
    }
    if (++shown > 10) continue;
    out << fmt::format("  {} {} ({:.1f} % of the events of {}) cap {}: {}\n", kind,
                       logText(name, 120), 100 * share, o.events_path, money(*cap),
                       capText(total * share, *cap));
  }
  if (shown > 10) out << fmt::format("  ... and {} more {}s with a cap\n", shown - 10, kind);
  if (uncapped > 0)
    out << fmt::format("  {} {}(s) of {} have no cap (not in budget.{}, no \"*\"): {}{}\n",
                       uncapped, kind, o.events_path, key, uncapped_names,
                       uncapped > 5 ? ", …" : "");
}

/// From a config: the daily caps against the projection, then what the figures leave out.
void printBudget(const Estimate& e, std::ostream& out) {
  const EstimateOptions& o = e.options;
  if (o.config_path.empty()) return;
  out << fmt::format("\nbudget ({}):\n", o.config_path);
  double capped = 0;  // what the judges can spend, each held to its own cap
  for (const EstimateRow& r : e.rows) {
    const double own = r.judge.daily_limit_eur;
    capped += own > 0 ? std::min(own, r.eur_per_day) : r.eur_per_day;
    if (own > 0)
      out << fmt::format("  {} daily_limit_eur {:.2f}: {}\n", r.judge.name, own,
                         capText(r.eur_per_day, own));
  }
  if (o.daily_limit_eur > 0)
    out << fmt::format("  budget.daily_limit_eur {:.2f} (every LLM judge together): {}\n",
                       o.daily_limit_eur, capText(capped, o.daily_limit_eur));
  printScopeCaps("tenant", "tenants", o.tenant_caps, o.tenant_shares, capped, o, out);
  printScopeCaps("app", "apps", o.app_caps, o.app_shares, capped, o, out);
  for (const auto& note : o.notes) out << "  note: " << note << "\n";
}

}  // namespace

void printEstimate(const Estimate& e, std::ostream& out) {
  const EstimateOptions& o = e.options;
  if (!o.config_path.empty())
    out << fmt::format(
        "config: {} (its LLM judges with max_tokens as the output tokens, sampling.rate, "
        "budget.usd_to_eur and budget.prices, unless given as flags)\n",
        o.config_path);
  if (o.requests_per_second > 0)
    out << fmt::format("traffic: {} requests/s = {} requests/day\n", rate(o.requests_per_second),
                       quantity(o.requests_per_day));
  else
    out << fmt::format("traffic: {} requests/day\n", quantity(o.requests_per_day));
  out << fmt::format("sampled: {} x sample rate {} = {} events/day\n", quantity(o.requests_per_day),
                     rate(o.sample_rate), quantity(o.requests_per_day * o.sample_rate));
  out << fmt::format("USD to EUR {}; month = {} days; no prompt-cache discount assumed\n\n",
                     rate(o.usd_to_eur), kEstimateDaysPerMonth);

  std::vector<std::vector<std::string>> rows = {{"judge", "model", "rate", "tokens in/out",
                                                 "calls/day", "USD/call", "USD/day", "USD/month",
                                                 "EUR/call", "EUR/day", "EUR/month"}};
  for (std::size_t i = 0; i < e.rows.size(); ++i) {
    const EstimateRow& r = e.rows[i];
    rows.push_back(
        {r.judge.name.empty() ? std::to_string(i + 1) : r.judge.name, r.judge.model,
         rate(r.judge.rate), fmt::format("{}/{}", r.judge.input_tokens, r.judge.output_tokens),
         quantity(r.calls_per_day), fmt::format("{:.6f}", r.usd_per_call), money(r.usd_per_day),
         money(r.usd_per_month), fmt::format("{:.6f}", r.eur_per_call), money(r.eur_per_day),
         money(r.eur_per_month)});
  }
  rows.push_back({"total", "", "", "", quantity(e.calls_per_day), "", money(e.usd_per_day),
                  money(e.usd_per_month), "", money(e.eur_per_day), money(e.eur_per_month)});
  printTable(rows, 2, out);
  if (o.escalation_share < 1)
    out << fmt::format(
        "\ncascade: escalation share {} (assay report --cascade) applied to {}: EUR {} a day "
        "instead of EUR {} without the cascade; EUR {} saved a month\n",
        rate(o.escalation_share),
        o.config_path.empty() || (!o.judges.empty() && o.judges[0].gated)
            ? "every --judge"
            : "the judges with a run_if",
        money(e.eur_per_day), money(e.eur_per_day_without_cascade),
        money(e.eur_per_month_without_cascade - e.eur_per_month));

  out << "\nprices used, USD per million tokens (input / cached input / output):\n";
  std::vector<std::vector<std::string>> prices;
  std::vector<std::string> seen;
  for (const EstimateRow& r : e.rows) {
    if (std::find(seen.begin(), seen.end(), r.judge.model) != seen.end()) continue;
    seen.push_back(r.judge.model);
    std::string source = r.price_source;
    if (r.priced_as != r.judge.model) source += ", as " + r.priced_as;
    prices.push_back({"  " + r.judge.model,
                      fmt::format("{} / {} / {}", perMtok(r.price.input_usd_per_mtok),
                                  perMtok(r.price.cached_input_usd_per_mtok),
                                  perMtok(r.price.output_usd_per_mtok)),
                      "(" + source + ")"});
  }
  printTable(prices, 3, out);
  printBudget(e, out);
}

}  // namespace assay
