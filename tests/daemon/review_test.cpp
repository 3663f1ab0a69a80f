// The human review loop's routing (daemon/review.hpp, docs/review.md): below a judge's
// threshold, a random share of the rest the same for every tenant, at most N an hour.
#include "daemon/review.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace assay;

namespace {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("assay_review_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

double counter(prometheus::Registry& r, const std::string& name, const std::string& judge,
               const std::string& reason) {
  for (const auto& f : r.Collect())
    if (f.name == name)
      for (const auto& m : f.metric) {
        std::string j, why;
        for (const auto& l : m.label) (l.name == "judge" ? j : why) = l.value;
        if (j == judge && why == reason) return m.counter.value;
      }
  return -1;
}

Judgment judged(const std::string& id, const std::string& tenant, double faith, double other) {
  Judgment j;
  j.id = id;
  j.tenant = tenant;
  j.verdicts.push_back({"faith", "faithfulness", Verdict::ok(faith), 1, 4, 1.0, nullptr});
  j.verdicts.push_back({"overlap", "faithfulness", Verdict::ok(other), 0, 1, 0.1, nullptr});
  return j;
}

std::vector<rapidjson::Document> lines(const std::string& path) {
  std::vector<rapidjson::Document> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    out.emplace_back();
    out.back().Parse(l.c_str());
  }
  return out;
}

}  // namespace

TEST_CASE("review: below the threshold, a share of the rest per tenant, at most N an hour") {
  TempDir dir;
  ReviewOptions o;
  o.path = (dir.path / "sub" / "review.jsonl").string();
  o.judges = {{"faith", 2.5}};
  o.share = 0.1;
  o.max_per_hour = 1000;
  prometheus::Registry reg;
  ReviewRouter router(o, reg);
  constexpr int kEvents = 4000;
  int below = 0;
  std::map<std::string, int> per_tenant;
  for (int i = 0; i < kEvents; ++i) {
    Event e;
    e.id = "e" + std::to_string(i);
    e.tenant = i % 4 == 0 ? "small" : "big";
    e.question = "q";
    e.answer = "a";
    router.remember(e);
    const double score = i % 10 == 0 ? 1 : 4;  // one in ten below 2.5
    below += score < 2.5 ? 1 : 0;
    router.route(judged(e.id, e.tenant, score, 0.1), 1'764'892'800'000LL + i);
  }
  const auto got = lines(o.path);
  const double routed_below = counter(reg, "assay_review_routed_total", "faith", "below_threshold");
  const double routed_share = counter(reg, "assay_review_routed_total", "faith", "random_share");
  CHECK(routed_below == below);  // 400: every one below the threshold
  CHECK(static_cast<double>(got.size()) == routed_below + routed_share);
  // the "output" label read as the reason: one count per line the file took, none refused
  CHECK(counter(reg, "assay_review_written_total", "", "file") == static_cast<double>(got.size()));
  CHECK(counter(reg, "assay_review_write_errors_total", "", "file") == 0);
  CHECK(counter(reg, "assay_review_written_total", "", "topic") == 0);
  // The share of the 3,600 others: 10 % within a binomial 4-sigma band (sd 18).
  CHECK(routed_share > 360 - 72);
  CHECK(routed_share < 360 + 72);
  // The same share of each tenant's events (stratified): small has a quarter of the others.
  int small = 0;
  for (const auto& d : got)
    if (std::string(d["reasons"][0]["reason"].GetString()) == "random_share" &&
        std::string(d["event"]["tenant"].GetString()) == "small")
      ++small;
  CHECK(small > 0.1 * 900 - 36);
  CHECK(small < 0.1 * 900 + 36);
  // A line: the event, its judgment, why.
  REQUIRE_FALSE(got.empty());
  const auto& first = got.front();
  CHECK(std::string(first["event"]["id"].GetString()) == "e0");
  CHECK(std::string(first["reasons"][0]["judge"].GetString()) == "faith");
  CHECK(std::string(first["reasons"][0]["reason"].GetString()) == "below_threshold");
  CHECK(first["reasons"][0]["threshold"].GetDouble() == 2.5);
  CHECK(first["judgment"]["verdicts"].Size() == 2);
  // overlap is not a review judge: never a reason.
  CHECK(counter(reg, "assay_review_routed_total", "overlap", "below_threshold") == -1);
}

TEST_CASE("review: the hourly cap per judge, and a judgment whose event was not kept") {
  TempDir dir;
  ReviewOptions o;
  o.path = (dir.path / "review.jsonl").string();
  o.judges = {{"faith", 2.5}};
  o.share = 0;
  o.max_per_hour = 3;
  prometheus::Registry reg;
  ReviewRouter router(o, reg);
  const std::int64_t hour = 1'764'892'800'000LL;
  for (int i = 0; i < 5; ++i) {
    Event e;
    e.id = "e" + std::to_string(i);
    router.remember(e);
    router.route(judged(e.id, "", 1, 0), hour + i);
  }
  CHECK(counter(reg, "assay_review_routed_total", "faith", "below_threshold") == 3);
  CHECK(counter(reg, "assay_review_skipped_total", "faith", "hourly_cap") == 2);
  Event next;
  next.id = "next-hour";
  router.remember(next);
  router.route(judged(next.id, "", 1, 0), hour + 3'600'000);  // a new hour: routed again
  CHECK(counter(reg, "assay_review_routed_total", "faith", "below_threshold") == 4);
  router.route(judged("never-remembered", "", 1, 0), hour + 3'600'001);
  CHECK(counter(reg, "assay_review_skipped_total", "faith", "no_event") == 1);
  CHECK(lines(o.path).size() == 4);
  // An unwritable path: refused at start with the file named.
  o.path = "/proc/assay-review.jsonl";
  CHECK_THROWS_WITH(ReviewRouter(o, reg), doctest::Contains("review.path: cannot open"));
  // A FIFO without reader: refused at once (open(2) blocked start-up for good).
  o.path = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(o.path.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(ReviewRouter(o, reg), doctest::Contains("a FIFO without reader"));
  // A topic needs the pipeline's producer.
  o.path.clear();
  o.topic = "review";
  CHECK_THROWS_WITH(ReviewRouter(o, reg), doctest::Contains("review.topic: 'review'"));
}
