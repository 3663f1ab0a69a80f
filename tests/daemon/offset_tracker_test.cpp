#include "daemon/offset_tracker.hpp"

#include <doctest/doctest.h>

using namespace assay;
using Advanced = std::vector<std::pair<std::int32_t, std::int64_t>>;

TEST_CASE("the committable position never passes an unfinished event") {
  OffsetTracker t;
  CHECK(t.committable(0) == -1);
  t.begin(0, 10);
  t.begin(0, 11);
  t.skip(0, 12);  // not sampled: finished at once
  t.begin(0, 13);
  CHECK(t.committable(0) == 10);
  CHECK(t.pending() == 3);
  t.finish(0, 11);  // out of order: 10 still pending
  CHECK(t.committable(0) == 10);
  t.finish(0, 10);
  CHECK(t.committable(0) == 13);
  t.finish(0, 13);
  CHECK(t.committable(0) == 14);  // one past the highest offset consumed
  CHECK(t.pending() == 0);
}

TEST_CASE("takeAdvanced reports each partition once per advance") {
  OffsetTracker t;
  t.begin(0, 0);
  t.skip(1, 5);
  CHECK(t.takeAdvanced() == Advanced{{0, 0}, {1, 6}});
  CHECK(t.takeAdvanced().empty());
  t.finish(0, 0);
  CHECK(t.takeAdvanced() == Advanced{{0, 1}});
  t.begin(1, 6);
  t.begin(1, 7);
  t.finish(1, 7);
  CHECK(t.takeAdvanced().empty());  // 6 still pending: position stays 6
  t.finish(1, 6);
  CHECK(t.takeAdvanced() == Advanced{{1, 8}});
}

TEST_CASE("revoked partitions are forgotten; late finishes are ignored") {
  OffsetTracker t;
  t.begin(3, 100);
  t.forget({3});
  CHECK(t.committable(3) == -1);
  t.finish(3, 100);  // an in-flight event of a revoked partition completes later
  CHECK(t.committable(3) == -1);
  CHECK(t.pending() == 0);
}
