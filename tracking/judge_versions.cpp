#include "tracking/judge_versions.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace assay {
namespace {

std::string typeOf(const JudgeVersion& v) {
  for (const auto& [name, value] : v.fields)
    if (name == "type") return value;
  return "";
}

}  // namespace

JudgeVersions::JudgeVersions(prometheus::Registry& registry, std::function<double()> wall_clock)
    : clock_(std::move(wall_clock)),
      info_(prometheus::BuildGauge()
                .Name("assay_judge_version_info")
                .Help("A judge version seen by this process: its first-seen time, Unix seconds")
                .Register(registry)),
      current_(prometheus::BuildGauge()
                   .Name("assay_judge_version_current")
                   .Help("1 for the version a judge judges with now, 0 for an earlier one")
                   .Register(registry)),
      changes_(prometheus::BuildCounter()
                   .Name("assay_judge_version_changes_total")
                   .Help("Configuration reloads that gave a judge a new version")
                   .Register(registry)) {}

double JudgeVersions::now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void JudgeVersions::show(const std::string& judge, const JudgeVersion& v, Seen& seen) {
  for (const auto& s : seen.shown) current_.Add({{"judge", judge}, {"judge_version", s.id}}).Set(0);
  const auto known = std::find_if(seen.shown.begin(), seen.shown.end(),
                                  [&](const auto& s) { return s.id == v.id; });
  if (known == seen.shown.end()) {
    seen.shown.push_back({v.id, typeOf(v), now()});
    info_.Add({{"judge", judge}, {"judge_version", v.id}, {"type", seen.shown.back().type}})
        .Set(seen.shown.back().first_seen);
  }
  current_.Add({{"judge", judge}, {"judge_version", v.id}}).Set(1);
  while (seen.shown.size() > kMaxVersionsShown) {
    const auto& old = seen.shown.front();
    info_.Remove(&info_.Add({{"judge", judge}, {"judge_version", old.id}, {"type", old.type}}));
    current_.Remove(&current_.Add({{"judge", judge}, {"judge_version", old.id}}));
    seen.shown.pop_front();
  }
}

std::vector<JudgeVersions::Change> JudgeVersions::update(const std::vector<Configured>& judges) {
  std::vector<Change> out;
  // A judge no longer configured judges with no version now.
  for (auto& entry : seen_) {  // (clang 14 cannot capture a structured binding)
    const std::string& name = entry.first;
    if (std::none_of(judges.begin(), judges.end(),
                     [&](const Configured& c) { return c.name == name && c.version; }))
      for (const auto& s : entry.second.shown)
        current_.Add({{"judge", name}, {"judge_version", s.id}}).Set(0);
  }
  for (const auto& j : judges) {
    if (!j.version) continue;
    auto [it, added] = seen_.try_emplace(j.name);
    Seen& seen = it->second;
    if (added) {
      spdlog::info("judge '{}': version {}", j.name, j.version->id);
      changes_.Add({{"judge", j.name}});  // at 0 from the start: increase() sees the first
    } else if (seen.current && seen.current->id != j.version->id) {
      Change c{j.name, seen.current->id, j.version->id,
               changedFields(seen.current->fields, j.version->fields)};
      spdlog::warn(
          "judge '{}': new version {} (was {}; changed: {}): its statistics start over, its "
          "series carry judge_version=\"{}\"",
          j.name, c.to, c.from, fmt::join(c.fields, ", "), c.to);
      changes_.Add({{"judge", j.name}}).Increment();
      out.push_back(std::move(c));
    }
    seen.current = j.version;
    show(j.name, *j.version, seen);
  }
  return out;
}

}  // namespace assay
