#include "cli/estimate.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "judges/llm/pricing.hpp"
#include "judges/llm/prompt.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {

doctest::Approx money(double v) { return doctest::Approx(v).epsilon(1e-12); }

Estimate estimate(const std::vector<std::string>& args) {
  return computeEstimate(parseEstimateArgs(args));
}

std::string printed(const Estimate& e) {
  std::ostringstream out;
  printEstimate(e, out);
  return out.str();
}

}  // namespace

TEST_CASE("2,000 gpt-4o calls a day at 800/200: $8.00/day, $240.00/month, EUR 220.80/month") {
  const Estimate e =
      estimate({"--requests-per-day", "2000", "--sample-rate", "1", "--judge", "gpt-4o"});
  REQUIRE(e.rows.size() == 1);
  const EstimateRow& r = e.rows[0];
  CHECK(r.judge.input_tokens == 800);
  CHECK(r.judge.output_tokens == 200);
  CHECK(r.calls_per_day == money(2000));
  CHECK(r.usd_per_call == money(0.00400));
  CHECK(r.usd_per_day == money(8.00));
  CHECK(r.usd_per_month == money(240.00));
  CHECK(r.eur_per_day == money(7.36));
  CHECK(r.eur_per_month == money(220.80));
  CHECK(e.usd_per_month == money(240.00));
  CHECK(e.eur_per_month == money(220.80));

  const std::string text = printed(e);
  CAPTURE(text);
  // One row for the judge and one for the total, with the figures at cent precision.
  CHECK(text.find("\n1      gpt-4o     1        800/200       2000  0.004000     8.00     240.00  "
                  "0.003680     7.36     220.80\n") != std::string::npos);
  CHECK(text.find("\ntotal                                    2000               8.00     240.00   "
                  "            7.36     220.80\n") != std::string::npos);
  CHECK(text.find("2.50 / 1.25 / 10.00") != std::string::npos);
}

TEST_CASE("the same 2,000 calls from a traffic rate and a sample rate") {
  // 40,000 requests/day sampled at 5 %; or 0.4630 requests/s ≈ 40,003 a day.
  const Estimate per_day = estimate(
      {"--requests-per-day", "40000", "--sample-rate", "0.05", "--judge", "gpt-4o:1:800:200"});
  CHECK(per_day.calls_per_day == money(2000));
  CHECK(per_day.eur_per_month == money(220.80));
  const Estimate per_second =
      estimate({"--requests-per-second", "2", "--sample-rate", "0.05", "--judge", "gpt-4o"});
  CHECK(per_second.options.requests_per_day == money(172800));
  CHECK(per_second.calls_per_day == money(8640));
}

TEST_CASE("several judges: rates, token sizes, totals, EUR rate") {
  const Estimate e =
      estimate({"--requests-per-day", "30000", "--sample-rate", "0.05", "--judge", "gpt-4o-mini",
                "--judge", "gpt-4o:0.2:1500:100", "--usd-to-eur", "0.9"});
  REQUIRE(e.rows.size() == 2);
  // 1,500 gpt-4o-mini calls = $0.36 a day.
  CHECK(e.rows[0].calls_per_day == money(1500));
  CHECK(e.rows[0].usd_per_day == money(0.36));
  CHECK(e.rows[0].eur_per_day == money(0.324));
  // 300 gpt-4o calls of 1,500/100 tokens = 300 × $0.00475.
  CHECK(e.rows[1].calls_per_day == money(300));
  CHECK(e.rows[1].usd_per_call == money(0.00475));
  CHECK(e.calls_per_day == money(1800));
  CHECK(e.usd_per_day == money(0.36 + 1.425));
  CHECK(e.usd_per_month == money(30 * (0.36 + 1.425)));
  CHECK(e.eur_per_month == money(0.9 * 30 * (0.36 + 1.425)));
}

TEST_CASE("--price overrides a built-in price or prices an unknown model") {
  const Estimate e = estimate({"--requests-per-day", "1000", "--sample-rate", "1", "--judge",
                               "llama3.1:8b", "--price", "llama3.1:8b=0.20/0.40", "--judge",
                               "gpt-4o-2024-11-20", "--price", "gpt-4o=2/1/8"});
  REQUIRE(e.rows.size() == 2);
  CHECK(e.rows[0].judge.model == "llama3.1:8b");  // the colon in the name is the model's
  CHECK(e.rows[0].judge.rate == 1.0);
  CHECK(e.rows[0].price.cached_input_usd_per_mtok == 0.20);
  CHECK(e.rows[0].usd_per_call == money((800 * 0.20 + 200 * 0.40) / 1e6));
  CHECK(e.rows[1].priced_as == "gpt-4o");
  CHECK(e.rows[1].price_overridden);
  CHECK(e.rows[1].usd_per_call == money(0.0032));
  CHECK(e.rows[1].price.cache_write_usd_per_mtok == 2.5);  // 1.25 x input unless given
  const auto w = parseEstimateArgs({"--requests-per-day", "1", "--sample-rate", "1", "--judge",
                                    "claude-sonnet-4", "--price", "claude-sonnet-4=3/0.3/15/6"});
  CHECK(w.prices.at(0).second.cache_write_usd_per_mtok == 6.0);
  const std::string text = printed(e);
  CAPTURE(text);
  CHECK(text.find("(--price, as gpt-4o)") != std::string::npos);
}

TEST_CASE("an unpriced model is refused with a message naming it") {
  const auto args = std::vector<std::string>{
      "--requests-per-day", "1000", "--sample-rate", "1", "--judge", "my-azure-deployment"};
  CHECK_THROWS_WITH_AS(
      estimate(args), doctest::Contains("no price for model 'my-azure-deployment'"), EstimateError);
  // A name that merely starts like a priced model is not priced by its prefix.
  CHECK_THROWS_AS(estimate({"--requests-per-day", "1", "--sample-rate", "1", "--judge", "o3-pro"}),
                  EstimateError);
}

TEST_CASE("bad arguments are errors with a clear message") {
  const std::vector<std::string> ok = {"--sample-rate", "0.1", "--judge", "gpt-4o-mini"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), ok.begin(), ok.end());
    return extra;
  };
  CHECK_THROWS_WITH_AS(parseEstimateArgs(ok), doctest::Contains("--requests-per-day N is required"),
                       EstimateError);
  CHECK_THROWS_WITH_AS(
      parseEstimateArgs(with({"--requests-per-day", "1", "--requests-per-second", "1"})),
      doctest::Contains("not both"), EstimateError);
  CHECK_THROWS_WITH_AS(parseEstimateArgs(with({"--requests-per-day", "many"})),
                       doctest::Contains("'many' is not a number"), EstimateError);
  CHECK_THROWS_AS(parseEstimateArgs(with({"--requests-per-day", "-5"})), EstimateError);
  CHECK_THROWS_AS(parseEstimateArgs(with({"--requests-per-day", "nan"})), EstimateError);
  CHECK_THROWS_AS(parseEstimateArgs(with({"--requests-per-day", "10", "--frobnicate", "1"})),
                  EstimateError);
  CHECK_THROWS_AS(parseEstimateArgs(with({"--requests-per-day"})), EstimateError);
  CHECK_THROWS_AS(parseEstimateArgs({"--requests-per-day", "1", "--judge", "gpt-4o"}),
                  EstimateError);  // no sample rate
  CHECK_THROWS_AS(
      parseEstimateArgs({"--requests-per-day", "1", "--sample-rate", "1.5", "--judge", "gpt-4o"}),
      EstimateError);
  CHECK_THROWS_AS(parseEstimateArgs({"--requests-per-day", "1", "--sample-rate", "1"}),
                  EstimateError);  // no judge
  CHECK_THROWS_AS(parseEstimateArgs(with({"--requests-per-day", "1", "--usd-to-eur", "0"})),
                  EstimateError);
  for (const char* judge : {"gpt-4o:0", "gpt-4o:2", "gpt-4o:0.5:800", "gpt-4o:1:800:-1",
                            "gpt-4o:1:800.5:200", ":0.5", ""}) {
    CAPTURE(judge);
    CHECK_THROWS_AS(
        parseEstimateArgs({"--requests-per-day", "1", "--sample-rate", "1", "--judge", judge}),
        EstimateError);
  }
  for (const char* price :
       {"gpt-4o", "=1/2/3", "gpt-4o=1", "gpt-4o=1/2/3/4/5", "gpt-4o=a/b", "gpt-4o=-1/2"}) {
    CAPTURE(price);
    CHECK_THROWS_AS(parseEstimateArgs(with({"--requests-per-day", "1", "--price", price})),
                    EstimateError);
  }
}

namespace {

// An assayd configuration with two LLM judges (one with its own cap and a price from
// budget.prices, one behind run_if), a cheap judge and a sampling rule.
std::string writeConfig() {
  const std::string path = "/tmp/assay_estimate_config_" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << R"(kafka: {brokers: embedded, topic: rag.events, group_id: estimate}
sampling:
  rate: 0.1
  rules:
    - {match: {tenant: acme}, rate: 0.5}
budget:
  usd_to_eur: 0.9
  daily_limit_eur: 1.0
  prices:
    my-model: {input: 1.0, output: 2.0}
judges:
  - {name: context_overlap, kind: lexical, metric: context_overlap}
  - name: faith_llm
    kind: llm
    criterion: faithfulness
    model: gpt-4o-mini
    rate: 0.5
    max_tokens: 100
    run_if: [{judge: context_overlap, below: 0.8}]
  - name: relevancy_llm
    kind: llm
    criterion: answer_relevancy
    model: my-model
    endpoint: http://127.0.0.1:8000/v1
    daily_limit_eur: 0.5
)";
  return path;
}

}  // namespace

TEST_CASE("--config: the LLM judges, sampling rate, EUR rate, prices and caps of assayd's file") {
  const std::string config = writeConfig();
  const Estimate e = estimate({"--requests-per-day", "100000", "--config", config});
  CHECK(e.options.sample_rate == 0.1);
  CHECK(e.options.usd_to_eur == 0.9);
  CHECK(e.options.daily_limit_eur == 1.0);
  REQUIRE(e.rows.size() == 2);  // context_overlap makes no paid call
  // Tokens in: each judge's system prompt, counted from its rubric, + 800 for the event.
  const std::int64_t faith_sys =
      llm::estimateTokens(llm::systemPrompt(*llm::builtinRubric("faithfulness")));
  const std::int64_t rel_sys =
      llm::estimateTokens(llm::systemPrompt(*llm::builtinRubric("answer_relevancy")));
  CHECK(faith_sys > 1000);  // four worked examples
  const EstimateRow& faith = e.rows[0];
  CHECK(faith.judge.name == "faith_llm");
  CHECK(faith.judge.model == "gpt-4o-mini");
  CHECK(faith.judge.rate == 0.5);
  CHECK(faith.judge.input_tokens == faith_sys + 800);
  CHECK(faith.judge.output_tokens == 100);    // its max_tokens
  CHECK(faith.calls_per_day == money(5000));  // 100,000 x 0.1 x 0.5
  const double faith_usd = ((faith_sys + 800) * 0.15 + 100 * 0.60) / 1e6;
  CHECK(faith.usd_per_call == money(faith_usd));
  CHECK(faith.eur_per_day == money(5000 * faith_usd * 0.9));
  const EstimateRow& rel = e.rows[1];
  CHECK(rel.judge.output_tokens == 300);  // max_tokens' default
  CHECK(rel.judge.daily_limit_eur == 0.5);
  CHECK(rel.price_source == "budget.prices");
  CHECK(rel.calls_per_day == money(10000));
  const double rel_usd = ((rel_sys + 800) * 1.0 + 300 * 2.0) / 1e6;
  CHECK(rel.usd_per_call == money(rel_usd));
  CHECK(rel.eur_per_day == money(10000 * rel_usd * 0.9));

  const std::string text = printed(e);
  CAPTURE(text);
  CHECK(text.find("config: " + config) == 0);
  CHECK(text.find(fmt::format("\nfaith_llm      gpt-4o-mini   0.5       {}/100       5000  {:.6f}",
                              faith_sys + 800, faith_usd)) != std::string::npos);
  CHECK(text.find(fmt::format("note: tokens in = the rubric's system prompt, counted from its "
                              "text (faith_llm {}, relevancy_llm {}), + 800 for the event's "
                              "material (--input-tokens)",
                              faith_sys, rel_sys)) != std::string::npos);
  CHECK(text.find("(budget.prices)") != std::string::npos);
  // relevancy_llm projects over its own 0.50 cap, and both over the global 1.00.
  CHECK(text.find("  relevancy_llm daily_limit_eur 0.50: projected") != std::string::npos);
  CHECK(text.find("  budget.daily_limit_eur 1.00 (every LLM judge together): projected") !=
        std::string::npos);
  CHECK(text.find("note: faith_llm runs only when its run_if holds") != std::string::npos);
  CHECK(text.find("note: sampling.rules (1 of them) are not modelled") != std::string::npos);
  std::filesystem::remove(config);
}

TEST_CASE("--config: flags given explicitly take precedence") {
  const std::string config = writeConfig();
  const Estimate e =
      estimate({"--config", config, "--requests-per-day", "100000", "--sample-rate", "0.05",
                "--usd-to-eur", "1", "--price", "my-model=2/4", "--input-tokens", "1000"});
  CHECK(e.options.sample_rate == 0.05);
  CHECK(e.options.usd_to_eur == 1.0);
  REQUIRE(e.rows.size() == 2);
  CHECK(e.rows[0].judge.input_tokens ==
        llm::estimateTokens(llm::systemPrompt(*llm::builtinRubric("faithfulness"))) + 1000);
  CHECK(e.rows[0].calls_per_day == money(2500));
  CHECK(e.rows[1].price_source == "--price");
  CHECK(e.rows[1].usd_per_call == money((e.rows[1].judge.input_tokens) * 2e-6 + 300 * 4e-6));
  // --judge replaces the config's judges.
  const Estimate j =
      estimate({"--config", config, "--requests-per-day", "1000", "--judge", "gpt-4o:1:800:200"});
  REQUIRE(j.rows.size() == 1);
  CHECK(j.rows[0].judge.model == "gpt-4o");
  CHECK(j.rows[0].calls_per_day == money(100));  // sampling.rate 0.1 still from the file
  CHECK_THROWS_WITH_AS(parseEstimateArgs({"--config", config, "--requests-per-day", "1", "--judge",
                                          "gpt-4o", "--input-tokens", "5"}),
                       doctest::Contains("--input-tokens applies to the judges of --config"),
                       EstimateError);
  std::filesystem::remove(config);
}

TEST_CASE("--config: an invalid file is refused with its FILE:LINE:COL errors") {
  const std::string path = "/tmp/assay_estimate_bad_" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << "sampling:\n  rate: 2\n";
  const std::string where = path + ":2:";
  CHECK_THROWS_WITH_AS(parseEstimateArgs({"--config", path, "--requests-per-day", "1"}),
                       doctest::Contains(where.c_str()), EstimateError);
  CHECK_THROWS_WITH_AS(
      parseEstimateArgs({"--config", path + ".missing", "--requests-per-day", "1"}),
      doctest::Contains("is not a valid assayd configuration"), EstimateError);
  std::filesystem::remove(path);
  // The repository's example and demo configurations load: the example's one LLM judge, the
  // demo's none (a zero estimate, not an error).
  const Estimate ex =
      estimate({"--config", std::string(test::kSourceDir) + "/config/assayd.example.yaml",
                "--requests-per-day", "100000"});
  REQUIRE(ex.rows.size() == 2);
  CHECK(ex.rows[0].judge.name == "faithfulness_llm");
  // The custom criterion is priced from its own rubric: shorter than a built-in's (no examples).
  CHECK(ex.rows[1].judge.name == "charter_llm");
  CHECK(ex.rows[1].judge.input_tokens > 800);
  CHECK(ex.rows[1].judge.input_tokens < ex.rows[0].judge.input_tokens);
  const Estimate demo = estimate(
      {"--config", std::string(test::kSourceDir) + "/config/demo.yaml", "--requests-per-day", "1"});
  CHECK(demo.rows.empty());
  CHECK(demo.usd_per_day == 0);
  CHECK(printed(demo).find("has no LLM judge (kind: llm)") != std::string::npos);
}

TEST_CASE("--escalation-share: the gated judges' calls scaled, and what the cascade saves") {
  // 2,000 gpt-4o calls a day at $0.004 = $8.00 = EUR 7.36 a day without the cascade; an
  // escalation share of 0.25 leaves 500 calls: EUR 1.84 a day, EUR 55.20 a month; saved
  // (7.36 − 1.84) × 30 = EUR 165.60 a month.
  const Estimate e = estimate({"--requests-per-day", "2000", "--sample-rate", "1", "--judge",
                               "gpt-4o", "--escalation-share", "0.25"});
  REQUIRE(e.rows.size() == 1);
  CHECK(e.rows[0].calls_per_day == money(500));
  CHECK(e.eur_per_day == money(1.84));
  CHECK(e.eur_per_day_without_cascade == money(7.36));
  CHECK(e.eur_per_month_without_cascade - e.eur_per_month == money(165.60));
  const std::string text = printed(e);
  CAPTURE(text);
  CHECK(text.find("cascade: escalation share 0.25 (assay report --cascade) applied to every "
                  "--judge: EUR 1.84 a day instead of EUR 7.36 without the cascade; EUR 165.60 "
                  "saved a month") != std::string::npos);
  // With --config, a --judge replaces the configured judges and is gated the same way (an
  // operator trial saw the share ignored there): 2,000 × 0.2 = 400 calls, half of them.
  const Estimate with_config =
      estimate({"--requests-per-day", "2000", "--config",
                std::string(test::kSourceDir) + "/config/assayd.example.yaml", "--sample-rate", "1",
                "--judge", "gpt-4o:0.2", "--escalation-share", "0.5"});
  REQUIRE(with_config.rows.size() == 1);
  CHECK(with_config.rows[0].calls_per_day == money(200));
  for (const char* bad : {"0", "1.5", "x"})
    CHECK_THROWS_WITH_AS(parseEstimateArgs({"--requests-per-day", "1", "--sample-rate", "1",
                                            "--judge", "gpt-4o", "--escalation-share", bad}),
                         doctest::Contains("--escalation-share"), EstimateError);
  // Without the flag nothing is said about a cascade.
  CHECK(printed(estimate({"--requests-per-day", "2000", "--sample-rate", "1", "--judge", "gpt-4o"}))
            .find("cascade:") == std::string::npos);
}

TEST_CASE("--events: each judge measured on real events: median prompt, the share it calls") {
  const std::string dir = "/tmp/assay_estimate_events_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/c.yaml", events = dir + "/e.jsonl";
  std::ofstream(config) << "sampling: {rate: 0.5}\n"
                           "judges:\n"
                           "  - name: tone_llm\n"
                           "    kind: llm\n"
                           "    criterion: tone\n"
                           "    model: gpt-4o-mini\n"
                           "    rubric:\n"
                           "      definition: The tone fits the tier.\n"
                           "      inputs: [question, contexts, answer, /m/tier]\n"
                           "      levels: {1: {name: off, description: Off.}, 2: {name: fits, "
                           "description: Fits.}}\n";
  std::ofstream(events)
      << R"({"id":"a","question":"q","answer":"a","contexts":["c"],"m":{"tier":"gold"}})"
      << "\n"
      << R"({"id":"b","question":"q","answer":"a","m":{"tier":"gold"}})"
      << "\n"
      << R"({"id":"c","question":"q","answer":"a","contexts":["c"]})"
      << "\n"
      << "not json\n";
  const Estimate e =
      estimate({"--config", config, "--requests-per-day", "60000", "--events", events});
  REQUIRE(e.rows.size() == 1);
  const auto& r = e.rows[0];
  CHECK(r.judge.called_share == doctest::Approx(1.0 / 3));
  CHECK(r.calls_per_day == money(60000 * 0.5 / 3));  // b has no contexts, c no tier
  CHECK(r.judge.input_tokens > 100);                 // the one prompt built: a's
  CHECK(r.judge.input_tokens < 600);                 // a short rubric, no examples
  const std::string text = printed(e);
  CHECK(text.find("note: tone_llm: measured on the 3 events of " + events +
                  ": tokens in = the median prompt of the 1 it would call (33 %); no call for "
                  "no_context 1, not_applicable 1") != std::string::npos);
  CHECK_THROWS_WITH_AS(parseEstimateArgs({"--config", config, "--requests-per-day", "1", "--events",
                                          events, "--input-tokens", "5"}),
                       doctest::Contains("--events measures the judges of --config"),
                       EstimateError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("budget.tenants: each tenant's share of the projection against its cap") {
  // Issue 31, "Budgets per tenant": the tenants' shares of --events split the projection.
  const std::string dir = "/tmp/assay_estimate_tenants_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/c.yaml", events = dir + "/e.jsonl";
  std::ofstream(config) << "sampling: {rate: 1.0}\n"
                           "budget:\n"
                           "  daily_limit_eur: 1000\n"
                           "  tenants: {acme: 0.5, \"*\": 100}\n"
                           "  apps: {checkout: 1}\n"
                           "judges:\n"
                           "  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o}\n";
  {
    std::ofstream e(events);
    for (int i = 0; i < 4; ++i)  // acme 3 of 4 events, globex 1
      e << R"({"id":"e)" << i << R"(","tenant":")" << (i < 3 ? "acme" : "globex")
        << R"(","question":"q","answer":"a","contexts":["c"]})"
        << "\n";
    e << "\nnot an event\n";  // a blank line (skipped) and an invalid one (counted)
  }
  const Estimate e =
      estimate({"--config", config, "--requests-per-day", "10000", "--events", events});
  REQUIRE(e.rows.size() == 1);
  const double total = e.eur_per_day;
  const auto shown = [](double v) {  // as the estimate prints euros
    return v >= 1 ? fmt::format("{:.2f}", v) : fmt::format("{:.4f}", v);
  };
  CHECK(total > 0.5 / 0.75);  // acme's share is over its cap
  CHECK(total * 0.25 < 100);  // globex's is within "*"
  const std::string text = printed(e);
  CAPTURE(text);
  CHECK(text.find(fmt::format("tenant acme (75.0 % of the events of {}) cap 0.5000: projected {} "
                              "EUR/day: over it",
                              events, shown(total * 0.75))) != std::string::npos);
  CHECK(text.find(fmt::format("tenant globex (25.0 % of the events of {}) cap 100.00: projected",
                              events)) != std::string::npos);
  CHECK(text.find(fmt::format("--events {}: 1 line(s) are not events and are left out (the first "
                              "at line 6: not_json); the shares come from the 4 events",
                              events)) != std::string::npos);
  // The events name no app, and no "*" caps the rest: named with their share.
  CHECK(text.find(fmt::format("1 app(s) of {} have no cap (not in budget.apps, no \"*\"): none "
                              "(100.0 %)\n",
                              events)) != std::string::npos);
  // Without --events: the shares are unknown, and it says so.
  const std::string without =
      printed(estimate({"--config", config, "--requests-per-day", "10000"}));
  CHECK(without.find("budget.tenants: 2 cap(s); a per-tenant projection needs --events FILE") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}
