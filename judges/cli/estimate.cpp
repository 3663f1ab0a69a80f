#include "judges/cli/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <ostream>
#include <string_view>

#include "judges/cli/cli_text.hpp"

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

EstimateOptions parseEstimateArgs(const std::vector<std::string>& args) {
  EstimateOptions o;
  std::optional<double> rps, rpd, sample;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    static const std::vector<std::string> kFlags = {"--requests-per-second", "--requests-per-day",
                                                    "--sample-rate",         "--judge",
                                                    "--usd-to-eur",          "--price"};
    if (std::find(kFlags.begin(), kFlags.end(), a) == kFlags.end())
      throw EstimateError("unknown argument '" + a + "'");
    if (i + 1 >= args.size()) throw EstimateError(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--requests-per-second")
      rps = number(a, v);
    else if (a == "--requests-per-day")
      rpd = number(a, v);
    else if (a == "--sample-rate")
      sample = number(a, v);
    else if (a == "--usd-to-eur")
      o.usd_to_eur = number(a, v);
    else if (a == "--judge")
      o.judges.push_back(parseJudge(v));
    else
      o.prices.push_back(parsePrice(v));
  }
  if (rps && rpd) throw EstimateError("give --requests-per-second or --requests-per-day, not both");
  if (!rps && !rpd)
    throw EstimateError("--requests-per-second R or --requests-per-day N is required");
  if ((rps && *rps < 0) || (rpd && *rpd < 0))
    throw EstimateError("the request rate must not be negative");
  o.requests_per_second = rps.value_or(0);
  o.requests_per_day = rpd ? *rpd : *rps * kSecondsPerDay;
  if (!sample) throw EstimateError("--sample-rate S is required (the share of requests sampled)");
  if (*sample < 0 || *sample > 1) throw EstimateError("--sample-rate must be in [0, 1]");
  o.sample_rate = *sample;
  if (o.judges.empty()) throw EstimateError("at least one --judge MODEL is required");
  if (!(o.usd_to_eur > 0)) throw EstimateError("--usd-to-eur must be positive");
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
    r.price_overridden = std::any_of(options.prices.begin(), options.prices.end(),
                                     [&](const auto& p) { return p.first == match->name; });
    r.price = match->price;
    llm::TokenUsage usage;
    usage.prompt_tokens = j.input_tokens;
    usage.completion_tokens = j.output_tokens;
    r.calls_per_day = options.requests_per_day * options.sample_rate * j.rate;
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
    e.rows.push_back(std::move(r));
  }
  return e;
}

namespace {

// Whole numbers print without decimals; others with up to 3, trailing zeros dropped.
std::string quantity(double v) {
  if (std::abs(v - std::round(v)) < 1e-9) return fmt::format("{:.0f}", std::round(v));
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

void printEstimate(const Estimate& e, std::ostream& out) {
  const EstimateOptions& o = e.options;
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
    rows.push_back({std::to_string(i + 1), r.judge.model, rate(r.judge.rate),
                    fmt::format("{}/{}", r.judge.input_tokens, r.judge.output_tokens),
                    quantity(r.calls_per_day), fmt::format("{:.6f}", r.usd_per_call),
                    money(r.usd_per_day), money(r.usd_per_month),
                    fmt::format("{:.6f}", r.eur_per_call), money(r.eur_per_day),
                    money(r.eur_per_month)});
  }
  rows.push_back({"total", "", "", "", quantity(e.calls_per_day), "", money(e.usd_per_day),
                  money(e.usd_per_month), "", money(e.eur_per_day), money(e.eur_per_month)});
  printTable(rows, 2, out);

  out << "\nprices used, USD per million tokens (input / cached input / output):\n";
  std::vector<std::vector<std::string>> prices;
  std::vector<std::string> seen;
  for (const EstimateRow& r : e.rows) {
    if (std::find(seen.begin(), seen.end(), r.judge.model) != seen.end()) continue;
    seen.push_back(r.judge.model);
    std::string source = r.price_overridden ? "--price" : "built-in";
    if (r.priced_as != r.judge.model) source += ", as " + r.priced_as;
    prices.push_back({"  " + r.judge.model,
                      fmt::format("{} / {} / {}", perMtok(r.price.input_usd_per_mtok),
                                  perMtok(r.price.cached_input_usd_per_mtok),
                                  perMtok(r.price.output_usd_per_mtok)),
                      "(" + source + ")"});
  }
  printTable(prices, 3, out);
}

}  // namespace assay
