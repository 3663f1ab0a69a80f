#include "cli/backfill.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace assay::cli {

TEST_CASE("backfill times: durations back from now, RFC 3339, 'now'") {
  const std::int64_t now = 1'764'633'600'000;  // 2025-12-02T00:00:00Z
  CHECK(parseBackfillTime("7d", now) == now - 7 * 86'400'000LL);
  CHECK(parseBackfillTime("12h", now) == now - 12 * 3'600'000LL);
  CHECK(parseBackfillTime("30m", now) == now - 30 * 60'000LL);
  CHECK(parseBackfillTime("90s", now) == now - 90'000);
  CHECK(parseBackfillTime("2w", now) == now - 14 * 86'400'000LL);
  CHECK(parseBackfillTime("now", now) == now);
  CHECK(parseBackfillTime("2025-12-01T08:00:00Z", now) == now - 16 * 3'600'000LL);
  // 100 years back at most: 999999999w (19 million years) is no time Kafka holds.
  CHECK(parseBackfillTime("5200w", now) == now - 5200 * 7 * 86'400'000LL);
  for (const char* bad : {"", "7", "d", "7y", "-7d", "7 d", "yesterday", "2025-13-01T00:00:00Z",
                          "999999999w", "5300w", "36700d"})
    CHECK_FALSE(parseBackfillTime(bad, now).has_value());
}

TEST_CASE("backfill arguments and their errors") {
  const std::int64_t now = 1'764'633'600'000;
  const auto o =
      parseBackfillArgs({"--config", "c.yaml", "--from", "1h", "--judge", "a", "--judge", "b",
                         "--rate", "0.1", "--max-cost-eur", "2.5", "--output", "o.jsonl"},
                        now);
  CHECK(o.config_path == "c.yaml");
  CHECK(o.from_ms == now - 3'600'000);
  CHECK(o.to_ms == now);
  CHECK_FALSE(o.to_given);
  CHECK(o.judges == std::vector<std::string>{"a", "b"});
  CHECK(o.rate == 0.1);
  CHECK(o.max_cost_eur == 2.5);
  CHECK_FALSE(o.yes);
  CHECK(o.output == "o.jsonl");
  CHECK(parseBackfillArgs({"--config", "c", "--from", "2h", "--to", "1h", "--yes"}, now).to_given);
  const auto fails = [&](std::vector<std::string> args, const char* what) {
    CHECK_THROWS_WITH_AS(parseBackfillArgs(args, now), doctest::Contains(what),
                         std::invalid_argument);
  };
  fails({"--from", "1h"}, "--config ASSAYD.yaml is required");
  fails({"--config", "c"}, "--from is required");
  fails({"--config", "c", "--from", "1h", "--to", "2h"}, "is not before --to");
  fails({"--config", "c", "--from", "soon"}, "expected an RFC 3339 time");
  fails({"--config", "c", "--from", "1h", "--rate", "0"},
        "--rate '0': expected a number in (0, 1]");
  fails({"--config", "c", "--from", "1h", "--rate", "1.5"}, "expected a number in (0, 1]");
  // A judge named twice runs once (an LLM judge would be paid twice).
  CHECK(parseBackfillArgs(
            {"--config", "c", "--from", "1h", "--judge", "x", "--judge", "y", "--judge", "x"}, now)
            .judges == std::vector<std::string>{"x", "y"});
  fails({"--config", "c", "--from", "1h", "--bogus", "x"}, "unknown argument '--bogus'");
  fails({"--config", "c", "--from"}, "--from needs a value");
}

TEST_CASE("backfill estimate: run_if judges added, sampling.rules as an upper bound, batch") {
  // The embedded broker, 40 events replayed into it, the estimate only (neither --yes nor
  // --max-cost-eur): nothing is called.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("assay_backfill_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream ev(dir / "events.jsonl");
    for (int i = 0; i < 40; ++i)
      ev << R"({"id": "e)" << i
         << R"(", "tenant": "acme", "question": "q", "contexts": [{"text": "c"}], "answer": "c"})"
         << "\n";
    std::ofstream cfg(dir / "c.yaml");
    cfg << "kafka: {brokers: embedded, topic: rag.events, partitions: 2}\n"
           "sampling:\n  rate: 0.05\n  rules:\n    - {match: {tenant: acme}, rate: 1.0}\n"
           "judges:\n"
           "  - {name: claim_support, kind: lexical, metric: claim_support}\n"
           "  - name: faithfulness_llm\n    kind: llm\n    criterion: faithfulness\n"
           "    model: gpt-4o-mini\n    endpoint: http://127.0.0.1:9/v1\n"
           "    api_key_env: ASSAY_BACKFILL_TEST_KEY\n    max_tokens: 200\n    batch: true\n"
           "    run_if: [{judge: claim_support, below: 0.8}]\n"
           "admin: {listen: \"127.0.0.1:0\"}\n";
  }
  ::setenv("ASSAY_BACKFILL_TEST_KEY", "k", 1);
  const std::int64_t now = 4'102'444'800'000;  // 2100: every replayed message is before it
  auto o = parseBackfillArgs({"--config", (dir / "c.yaml").string(), "--from", "1h", "--judge",
                              "faithfulness_llm", "--replay", (dir / "events.jsonl").string()},
                             now);
  o.to_given = false;  // --to: now, after the replay
  o.from_ms = 0;
  std::ostringstream out, err;
  CHECK(runBackfill(o, out, err) == 0);
  const std::string text = out.str();
  INFO(text, err.str());
  // claim_support is read by faithfulness_llm's run_if: it runs too.
  CHECK(text.find("also running claim_support (faithfulness_llm's run_if reads it)") !=
        std::string::npos);
  CHECK(text.find("events in range: 40") != std::string::npos);
  // sampling.rate 0.05, but tenant acme is sampled at 1.0: the estimate assumes 1.0.
  CHECK(text.find("up to 1 by sampling.rules") != std::string::npos);
  CHECK(text.find("-> at most 40 events") != std::string::npos);
  // 40 calls at most (run_if), 800 input + 200 output tokens of gpt-4o-mini ($0.15 and $0.60
  // per million, EUR 0.92 per USD): 40 × (800 × 0.15 + 200 × 0.60) / 1e6 × 0.92 = EUR 0.0088
  // synchronous, 0.0044 at batch prices, printed to the cent: 0.01 and 0.00.
  CHECK(text.find("faithfulness_llm (batch)") != std::string::npos);
  CHECK(text.find("at most 40") != std::string::npos);
  CHECK(text.find("as configured (batch: true judges at batch prices): EUR 0.00") !=
        std::string::npos);
  CHECK(text.find("nothing judged: run again with --yes") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace assay::cli
