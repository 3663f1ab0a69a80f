#include "judges/cli/backfill.hpp"

#include <doctest/doctest.h>

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
  for (const char* bad : {"", "7", "d", "7y", "-7d", "7 d", "yesterday", "2025-13-01T00:00:00Z"})
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
  fails({"--config", "c", "--from", "1h", "--rate", "0"}, "--rate must be above 0");
  fails({"--config", "c", "--from", "1h", "--rate", "1.5"}, "expected a number in [0, 1]");
  fails({"--config", "c", "--from", "1h", "--bogus", "x"}, "unknown argument '--bogus'");
  fails({"--config", "c", "--from"}, "--from needs a value");
}

}  // namespace assay::cli
