#pragma once
/// Per judge × criterion score tracking (issue 4): a rolling window of the last successful
/// scores (failures never enter it) summarised for leniency, and a drift detector comparing a
/// baseline window with the most recent one.

#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

#include "tracking/stats.hpp"

namespace assay::stats {

struct WindowSummary {
  std::size_t n = 0;
  double mean = 0;
  double top_share = 0;     ///< share of scores at the scale's maximum, [0, 1]
  double bottom_share = 0;  ///< share at the minimum, [0, 1]
  int distinct = 0;         ///< distinct values used (equal within 1e-9 of the scale's width)
  /// Shannon entropy of the scores over the scale's levels (integer scales of up to 11 levels)
  /// or 10 equal bins (other scales), divided by log(levels): 0 = one value only, 1 = uniform.
  double entropy = 0;
  bool lenient = false;  ///< top_share > leniency_max_ratio over at least min_samples
};

class ScoreWindow {
 public:
  /// `capacity` ≥ 1 scores; the scale is [min_score, max_score]; `max_age_s` > 0 also drops
  /// scores older than that many seconds (0 = count bound only).
  ScoreWindow(std::size_t capacity, double min_score, double max_score, double max_age_s = 0);
  /// A finite score within the scale, observed at `now_s` (any monotonic clock, seconds);
  /// anything else is rejected (false) and not counted.
  bool add(double score, double now_s = 0);
  /// Drops the scores older than max_age_s at `now_s` (no-op without a time bound).
  void expire(double now_s);
  /// nullopt when the window is empty.
  std::optional<WindowSummary> summary(double leniency_max_ratio, std::size_t min_samples) const;
  std::size_t size() const { return scores_.size(); }
  /// The scores in the window, oldest first.
  std::vector<double> values() const { return {scores_.begin(), scores_.end()}; }

 private:
  std::size_t capacity_;
  double min_, max_, max_age_;
  std::deque<double> scores_;
  std::deque<double> times_;  // parallel to scores_
};

/// Paired observations (x, y) of the same items, e.g. two judges' scores of one event, or a
/// judge's score and a human's: the last `capacity` pairs, and with `max_age_s` > 0 only those
/// younger than that many seconds.
class PairWindow {
 public:
  explicit PairWindow(std::size_t capacity, double max_age_s = 0)
      : capacity_(std::max<std::size_t>(1, capacity)), max_age_(max_age_s) {}
  void add(double x, double y, double now_s = 0);
  void expire(double now_s);
  std::size_t size() const { return x_.size(); }
  std::vector<double> xs() const { return {x_.begin(), x_.end()}; }
  std::vector<double> ys() const { return {y_.begin(), y_.end()}; }

 private:
  std::size_t capacity_;
  double max_age_;
  std::deque<double> x_, y_, t_;
};

struct DriftOptions {
  std::size_t baseline_size = 200;  ///< scores in the baseline window
  std::size_t recent_size = 100;    ///< scores in the recent window
  /// > 0: the window is a duration instead (seconds): the recent window holds the scores of the
  /// last recent_seconds; the baseline the scores of its first baseline_seconds (frozen) or of
  /// the baseline_seconds before the recent window (rolling). A duration window is evaluated
  /// once it holds kMinDurationScores scores.
  double baseline_seconds = 0, recent_seconds = 0;
  double alpha = 0.01;      ///< Mann–Whitney p-value threshold
  double min_delta = 0.25;  ///< the means must also differ by at least this much
  bool rolling = false;     ///< false: the first baseline_size scores are frozen as the baseline;
                         ///< true: the baseline is the baseline_size scores before the recent ones
};

struct DriftResult {
  double baseline_mean, recent_mean, p_value;
  bool drift;  ///< p < alpha and |recent − baseline| ≥ min_delta
};

/// Two-sided Mann–Whitney U test with tie correction (ordinal scores are full of ties) between
/// the baseline and the recent window. Times are seconds on any monotonic clock.
class DriftDetector {
 public:
  static constexpr std::size_t kMinDurationScores = 20;
  static constexpr std::size_t kMaxHistory = 1'000'000;  ///< memory bound of duration windows

  explicit DriftDetector(DriftOptions options);
  void add(double score, double now_s = 0);
  /// Freezes `scores` as the baseline (e.g. loaded from a file), ignoring `rolling`.
  void setBaseline(std::vector<double> scores);
  /// nullopt until both windows are full (or the test is undefined: every score tied).
  std::optional<DriftResult> evaluate(double now_s = 0) const;

 private:
  struct Scored {
    double score, t;
  };
  DriftOptions options_;
  std::vector<double> frozen_;
  std::optional<double> frozen_start_;  // time of the first baseline score (duration mode)
  bool frozen_set_ = false;
  std::deque<Scored> history_;  // recent (and, when rolling, the baseline before it)
  /// Index in history_ where the recent window starts, or nullopt when it is not full.
  std::optional<std::size_t> recentStart(double now_s) const;
  void trim(double now_s);
};

}  // namespace assay::stats
