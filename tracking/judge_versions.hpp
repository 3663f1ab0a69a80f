#pragma once
/// The configured judges' versions over a process's life (docs/metrics.md, "Judge versions"):
/// a version change is logged with the fields that changed, counted and exported, so that a
/// dashboard can draw when each version began.
///   assay_judge_version_info{judge, judge_version, type}  the version's first-seen time, Unix
///                                                         seconds (in this process); every
///                                                         version seen, at most
///                                                         kMaxVersionsShown per judge
///   assay_judge_version_current{judge, judge_version}     1 for the version judging now, 0
///                                                         for an earlier one still shown (every
///                                                         one of a judge a reload removed)
///   assay_judge_version_changes_total{judge}              reloads that gave a judge a new
///                                                         version
/// Poll thread only (start-up and SIGHUP).

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/judge_version.hpp"

namespace assay {

class JudgeVersions {
 public:
  /// Earlier versions of a judge whose series stay (older ones are removed).
  static constexpr std::size_t kMaxVersionsShown = 10;

  /// `wall_clock` returns Unix seconds (tests inject their own).
  explicit JudgeVersions(prometheus::Registry& registry, std::function<double()> wall_clock = {});

  struct Configured {
    std::string name;
    std::shared_ptr<const JudgeVersion> version;  ///< null: not versioned (skipped)
  };
  /// A change of a judge's version found by update().
  struct Change {
    std::string judge, from, to;      ///< version ids
    std::vector<std::string> fields;  ///< what changed (changedFields)
  };
  /// The judges configured now (at start-up, then after each reload that rebuilt them): a
  /// judge seen before with another version is a change, logged (its fields), counted and
  /// returned; a new judge's version is logged once. Never throws on content.
  std::vector<Change> update(const std::vector<Configured>& judges);
  /// The version id `judge` judges with since the last update(), or "" (never versioned).
  std::string current(const std::string& judge) const {
    const auto it = seen_.find(judge);
    return it != seen_.end() && it->second.current ? it->second.current->id : std::string();
  }

 private:
  struct Seen {
    std::shared_ptr<const JudgeVersion> current;
    struct Shown {
      std::string id, type;
      double first_seen;
    };
    std::deque<Shown> shown;  // oldest first
  };
  double now() const;
  void show(const std::string& judge, const JudgeVersion& v, Seen& seen);

  std::function<double()> clock_;
  prometheus::Family<prometheus::Gauge>& info_;
  prometheus::Family<prometheus::Gauge>& current_;
  prometheus::Family<prometheus::Counter>& changes_;
  std::map<std::string, Seen> seen_;
};

}  // namespace assay
