#pragma once
/// The judges' drift canary (docs/canary.md): a fixed set of labelled events replayed through
/// every judge every `canary.every`, outside the event flow (its verdicts enter no production
/// series, window, sink or coverage count), LLM calls under the budget like any call and with
/// the verdict store (a run's event ids carry the run's period, so a restart within it re-emits
/// the stored verdicts instead of paying again). Per judge and version it exports the agreement
/// with the human labels and the mean score, and the change of both against the version's
/// first run:
///   assay_canary_mean_score{judge, judge_version}            the judge's own scale
///   assay_canary_agreement{judge, judge_version, statistic}  roc_auc (boolean label: a low
///                                                            score for a bad answer), spearman,
///                                                            kendall_tau (numeric label), kappa,
///                                                            kappa_quadratic (integer labels on
///                                                            the judge's integer scale)
///   assay_canary_baseline_mean_score, assay_canary_baseline_agreement{…}: the version's first
///                                                            run (canary.state_file keeps it)
///   assay_canary_mean_shift{judge, judge_version}            (mean − first mean) / scale width,
///                                                            [−1, 1]
///   assay_canary_agreement_drop{judge, judge_version, statistic}  first − now
///   assay_canary_verdicts{judge, judge_version, result}      scored, failed: in the last run
///   assay_canary_runs_total, assay_canary_last_run_timestamp_seconds, assay_canary_events,
///   assay_canary_invalid_lines
/// Statistics need at least 5 scored events (and both classes for ROC AUC); below that the
/// series are absent.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/options.hpp"
#include "core/event.hpp"
#include "daemon/judge_runner.hpp"

namespace assay {

/// One labelled event of the canary file.
struct CanaryItem {
  Event event;
  std::optional<bool> bad;       ///< a boolean label (true: the answer is bad)
  std::optional<double> number;  ///< a numeric label
};

/// The canary file, read and bounded.
struct CanarySet {
  std::vector<CanaryItem> items;      ///< the `sample` events with the lowest XXH3 of their id
  std::size_t lines = 0;              ///< non-empty lines read
  std::size_t invalid = 0;            ///< lines that are not events of the configured format
  std::size_t unlabelled = 0;         ///< events without a boolean or number at canary.label
  std::vector<std::string> problems;  ///< the first 5 lines that are not events, "FILE:LINE: why"
  std::string first_unlabelled;       ///< "FILE:LINE" of the first unlabelled event, or ""
};

/// At most this many lines and bytes in a canary file.
inline constexpr std::size_t kMaxCanaryLines = 100'000;
inline constexpr std::size_t kMaxCanaryBytes = std::size_t{64} << 20;

/// Reads canary.file with the event format of `fields`. Throws std::runtime_error naming the
/// file: unreadable, over kMaxCanaryBytes or kMaxCanaryLines, or no labelled event.
CanarySet loadCanarySet(const CanaryOptions& options, const EventFieldOptions& fields,
                        std::size_t max_event_bytes);

/// One judge's run: its scores with their items' labels.
struct CanaryStatistics {
  std::size_t scored = 0;
  /// Verdicts with an outcome that says the judge cannot judge this event (no_reference,
  /// empty_input, not_applicable, abstained, too_long…): the judge works, the event is not for it.
  std::size_t not_scored = 0;
  /// Failures: errors, timeouts, budget skips, and verdicts that did not come in time.
  std::size_t failed = 0;
  std::optional<double> mean;
  std::map<std::string, double> agreement;  ///< by statistic name (those defined)
};

/// The statistics of `scores` (score, item) on the judge's scale [min, max]; golden values from
/// scipy/sklearn in tests/daemon/canary_test.cpp.
CanaryStatistics canaryStatistics(const std::vector<std::pair<double, const CanaryItem*>>& scores,
                                  std::size_t failed, double min_score, double max_score);

class Canary {
 public:
  /// Starts the schedule: the first run `first_delay_s` seconds from now, then every
  /// canary.every. `runner` must outlive this object.
  Canary(const Config& config, JudgeRunner& runner, prometheus::Registry& registry, CanarySet set,
         double first_delay_s = 10);
  ~Canary();
  Canary(const Canary&) = delete;
  Canary& operator=(const Canary&) = delete;

  /// One run now, on this thread: every judge of the current set on every item; waits for the
  /// asynchronous verdicts at most `wait_s` seconds (those later count as failed). Returns the
  /// statistics by judge name. Thread-safe against the schedule (one run at a time).
  /// `period` (tests): the run's period instead of floor(now / canary.every).
  std::map<std::string, CanaryStatistics> runOnce(double wait_s = 600,
                                                  std::optional<long long> period = {});
  /// Stops the schedule (a run in progress stops waiting). Idempotent.
  void stop();

 private:
  struct Baseline {
    double at = 0;
    std::optional<double> mean;
    std::map<std::string, double> agreement;
  };
  void loop(double first_delay_s);
  void exportRun(const JudgeRunner::Handle& j, const CanaryStatistics& s);
  void loadState();
  void saveState();

  CanaryOptions options_;
  JudgeRunner& runner_;
  CanarySet set_;
  prometheus::Family<prometheus::Gauge>& mean_;
  prometheus::Family<prometheus::Gauge>& agreement_;
  prometheus::Family<prometheus::Gauge>& baseline_mean_;
  prometheus::Family<prometheus::Gauge>& baseline_agreement_;
  prometheus::Family<prometheus::Gauge>& shift_;
  prometheus::Family<prometheus::Gauge>& drop_;
  prometheus::Family<prometheus::Gauge>& verdicts_;
  prometheus::Counter& runs_;
  prometheus::Gauge& last_run_;
  std::mutex run_mu_;                                                 // one run at a time
  std::map<std::string, std::map<std::string, Baseline>> baselines_;  // judge → version → first
  bool state_failing_ = false;  // the last saveState() failed (logged once)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;  // last: it uses everything above
};

}  // namespace assay
