// The judges' versions over a process's life (tracking/judge_versions.hpp): a change is found,
// named by its fields, counted, and exported with each version's first-seen time.
#include "tracking/judge_versions.hpp"

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "tests/metric_value.hpp"

using namespace assay;

namespace {

std::optional<double> value(prometheus::Registry& r, const std::string& name,
                            const std::map<std::string, std::string>& labels) {
  return test::metricValue(r, name, labels);
}

std::size_t series(prometheus::Registry& r, const std::string& name) {
  for (const auto& f : r.Collect())
    if (f.name == name) return f.metric.size();
  return 0;
}

std::shared_ptr<const JudgeVersion> version(const std::string& rubric,
                                            const std::string& model = "\"gpt-4o-mini\"") {
  return std::make_shared<const JudgeVersion>(JudgeVersion::make({{"type", "llm"},
                                                                  {"kind", "llm"},
                                                                  {"template", "t1"},
                                                                  {"model", model},
                                                                  {"rubric", rubric}}));
}

}  // namespace

TEST_CASE("judge versions: first seen, then a change named by its fields and counted") {
  prometheus::Registry reg;
  double now = 1'700'000'000;
  JudgeVersions versions(reg, [&] { return now; });
  const auto v1 = version("{\"definition\":\"Is it faithful?\"}");
  const auto overlap = std::make_shared<const JudgeVersion>(
      JudgeVersion::make({{"type", "context_overlap"}, {"kind", "lexical"}, {"template", ""}}));
  CHECK(versions.update({{"faith", v1}, {"overlap", overlap}, {"unversioned", nullptr}}).empty());
  CHECK(value(reg, "assay_judge_version_info",
              {{"judge", "faith"}, {"judge_version", v1->id}, {"type", "llm"}}) == now);
  CHECK(value(reg, "assay_judge_version_current",
              {{"judge", "faith"}, {"judge_version", v1->id}}) == 1.0);
  CHECK(series(reg, "assay_judge_version_info") == 2);  // the unversioned judge has none
  CHECK(value(reg, "assay_judge_version_changes_total", {{"judge", "faith"}}) ==
        0.0);  // from the start

  // A reload that changes nothing of faith's: no change.
  now += 60;
  CHECK(versions.update({{"faith", v1}, {"overlap", overlap}}).empty());

  // A rubric edit and another model.
  now += 60;
  const auto v2 = version("{\"definition\":\"Is every claim supported?\"}", "\"gpt-4o\"");
  const auto changes = versions.update({{"faith", v2}, {"overlap", overlap}});
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].judge == "faith");
  CHECK(changes[0].from == v1->id);
  CHECK(changes[0].to == v2->id);
  CHECK(changes[0].fields == std::vector<std::string>{"model", "rubric"});
  CHECK(value(reg, "assay_judge_version_changes_total", {{"judge", "faith"}}) == 1.0);
  CHECK(value(reg, "assay_judge_version_info", {{"judge", "faith"}, {"judge_version", v2->id}}) ==
        now);
  // The old version stays drawn (its first-seen time), no longer current.
  CHECK(value(reg, "assay_judge_version_info", {{"judge", "faith"}, {"judge_version", v1->id}}) ==
        now - 120);
  CHECK(value(reg, "assay_judge_version_current",
              {{"judge", "faith"}, {"judge_version", v1->id}}) == 0.0);
  CHECK(value(reg, "assay_judge_version_current",
              {{"judge", "faith"}, {"judge_version", v2->id}}) == 1.0);

  // Back to the first version: a change again, its first-seen time kept.
  now += 60;
  CHECK(versions.update({{"faith", v1}}).size() == 1);
  CHECK(value(reg, "assay_judge_version_info", {{"judge", "faith"}, {"judge_version", v1->id}}) ==
        now - 180);
  CHECK(value(reg, "assay_judge_version_changes_total", {{"judge", "faith"}}) == 2.0);
}

TEST_CASE("judge versions: at most kMaxVersionsShown versions of a judge stay exported") {
  prometheus::Registry reg;
  JudgeVersions versions(reg, [] { return 1.0; });
  std::string first;
  for (int i = 0; i < 25; ++i) {
    const auto v = version("{\"n\":" + std::to_string(i) + "}");
    if (i == 0) first = v->id;
    versions.update({{"faith", v}});
  }
  CHECK(series(reg, "assay_judge_version_info") == JudgeVersions::kMaxVersionsShown);
  CHECK(series(reg, "assay_judge_version_current") == JudgeVersions::kMaxVersionsShown);
  CHECK_FALSE(value(reg, "assay_judge_version_info", {{"judge_version", first}}));
  CHECK(value(reg, "assay_judge_version_changes_total", {{"judge", "faith"}}) == 24.0);
}
