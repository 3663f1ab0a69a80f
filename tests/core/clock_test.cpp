// The one wall clock (core/clock.hpp).
#include "core/clock.hpp"

#include <doctest/doctest.h>

#include "core/rfc3339.hpp"

using namespace assay;

TEST_CASE("epochMs and utcSeconds: one clock, RFC 3339 UTC to the second") {
  CHECK(utcSeconds(0) == "1970-01-01T00:00:00Z");
  CHECK(utcSeconds(1'764'000'000'999) == "2025-11-24T16:00:00Z");  // the fraction truncated
  const std::int64_t now = epochMs();
  CHECK(now > 1'764'000'000'000);  // after this code was written
  CHECK(epochSeconds() == doctest::Approx(static_cast<double>(now) / 1000).epsilon(1e-6));
  // What it writes, the configuration's parser reads back (to the second).
  CHECK(parseRfc3339(utcSeconds(now)) == now / 1000 * 1000);
}

TEST_CASE("steadyNs: a steady time point in nanoseconds, now by default") {
  const auto t = std::chrono::steady_clock::now();
  CHECK(steadyNs(t) ==
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  CHECK(steadyNs() >= steadyNs(t));
  CHECK(steadyNs(t + std::chrono::milliseconds(3)) - steadyNs(t) == 3'000'000);
}
