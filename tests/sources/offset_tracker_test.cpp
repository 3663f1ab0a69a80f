#include "sources/offset_tracker.hpp"

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

TEST_CASE("commit metadata lists the finished offsets above the position, and restores them") {
  OffsetTracker t;
  for (std::int64_t o = 100; o < 110; ++o) t.begin(0, o);
  for (std::int64_t o : {101, 102, 104, 105, 106, 108, 109}) t.finish(0, o);
  t.skip(0, 110);  // sampled out: finished at once
  // Pending: 100, 103, 107. Position 100; [100, 111) covered; gaps 3 (103) and 4 (107).
  const auto commits = t.commits();
  REQUIRE(commits.size() == 1);
  CHECK(commits[0].position == 100);
  CHECK(commits[0].metadata == "assay1 11 3 4");

  OffsetTracker next;  // the next owner of the partition
  CHECK(next.restore(0, 100, commits[0].metadata) == 8);
  for (std::int64_t o = 95; o < 115; ++o) {
    const bool finished = o >= 101 && o <= 110 && o != 103 && o != 107;
    CHECK_MESSAGE(next.alreadyFinished(0, o) == finished, "offset " << o);
  }
  CHECK_FALSE(next.alreadyFinished(1, 101));  // another partition: nothing restored
  next.forget({0});
  CHECK_FALSE(next.alreadyFinished(0, 101));
}

TEST_CASE("commit metadata: nothing above the position, and the 4,000-byte cap") {
  CHECK(OffsetTracker::commitMetadata(5, 5, {}) == "");
  CHECK(OffsetTracker::commitMetadata(5, 6, {5}) == "");  // only the pending one itself
  CHECK(OffsetTracker::commitMetadata(5, 7, {5}) == "assay1 2");
  // 3,000 pending offsets 2 apart: the list stops under the cap and SPAN ends at the first
  // pending offset left out, so nothing after it counts as finished.
  std::set<std::int64_t> pending;
  for (std::int64_t o = 0; o < 6000; o += 2) pending.insert(o);
  const std::string m = OffsetTracker::commitMetadata(0, 6000, pending);
  CHECK(m.size() <= OffsetTracker::kMaxMetadataBytes);
  OffsetTracker t;
  const auto finished = t.restore(3, 0, m);
  CHECK(finished > 1000);
  CHECK(finished < 3000);
  CHECK(t.alreadyFinished(3, 1));
  CHECK_FALSE(t.alreadyFinished(3, 2));
  CHECK_FALSE(t.alreadyFinished(3, 5999));  // beyond the listed span: judged again
}

TEST_CASE("restore ignores metadata that is not assay's or is malformed") {
  OffsetTracker t;
  for (const char* bad : {"", "other", "assay1", "assay1 ", "assay1 x", "assay1 0", "assay1 5 5",
                          "assay1 5 2 3", "assay1 5 -1", "assay1 5  1", "assay1 99999999999999"})
    CHECK_MESSAGE(t.restore(0, 10, bad) == 0, bad);
  CHECK(t.restore(0, -1, "assay1 5") == 0);  // no committed offset
  CHECK_FALSE(t.alreadyFinished(0, 11));
  CHECK(t.restore(0, 10, "assay1 5 2") == 3);  // 11, 13, 14 finished; 10 and 12 not
  CHECK(t.alreadyFinished(0, 13));
  CHECK_FALSE(t.alreadyFinished(0, 12));
}

TEST_CASE("skips kept by the poll thread count at the next position read, never after a forget") {
  OffsetTracker t;
  t.begin(0, 10);
  t.skip(0, 11);
  t.skip(1, 40);
  t.skip(0, 12);
  t.skip(2, 7);
  t.skip(1, 39);  // an older offset never lowers the position
  CHECK(t.committable(0) == 10);
  t.finish(0, 10);
  CHECK(t.committable(0) == 13);
  CHECK(t.committable(1) == 41);
  CHECK(t.committable(2) == 8);
  t.skip(3, 5);
  const auto advanced = t.takeAdvanced();
  CHECK(advanced == Advanced{{0, 13}, {1, 41}, {2, 8}, {3, 6}});
  t.skip(1, 50);
  t.forget({1});  // revoked: the kept skip goes with it
  CHECK(t.committable(1) == -1);
  CHECK(t.commits().size() == 3);
  t.skip(4, 9);  // a kept skip is in the commits too
  const auto commits = t.commits();
  REQUIRE(commits.size() == 4);
  CHECK(commits.back().partition == 4);
  CHECK(commits.back().position == 10);
}

TEST_CASE("alreadyFinished: a restored range is asked about until its partition is forgotten") {
  OffsetTracker t;
  CHECK_FALSE(t.alreadyFinished(0, 11));  // nothing restored anywhere
  CHECK(t.restore(0, 10, "assay1 5 2") == 3);
  CHECK(t.restore(1, 20, "assay1 3") == 2);
  CHECK(t.restore(1, 20, "assay1 2") == 1);  // restored again: still one partition
  t.forget({0});
  CHECK_FALSE(t.alreadyFinished(0, 11));
  CHECK(t.alreadyFinished(1, 21));
  CHECK_FALSE(t.alreadyFinished(1, 22));
  t.forget({1});
  CHECK_FALSE(t.alreadyFinished(1, 21));
  CHECK(t.restore(1, 20, "assay1 3") == 2);  // held again
  CHECK(t.alreadyFinished(1, 22));
}
