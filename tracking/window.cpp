#include "tracking/window.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace assay::stats {

ScoreWindow::ScoreWindow(std::size_t capacity, double min_score, double max_score, double max_age_s)
    : capacity_(std::max<std::size_t>(1, capacity)),
      min_(min_score),
      max_(max_score),
      max_age_(max_age_s) {}

bool ScoreWindow::add(double score, double now_s) {
  if (!std::isfinite(score) || score < min_ || score > max_) return false;
  scores_.push_back(score);
  times_.push_back(now_s);
  if (scores_.size() > capacity_) {
    scores_.pop_front();
    times_.pop_front();
  }
  expire(now_s);
  return true;
}

void ScoreWindow::expire(double now_s) {
  if (max_age_ <= 0) return;
  while (!times_.empty() && now_s - times_.front() > max_age_) {
    times_.pop_front();
    scores_.pop_front();
  }
}

std::optional<WindowSummary> ScoreWindow::summary(double leniency_max_ratio,
                                                  std::size_t min_samples) const {
  if (scores_.empty()) return std::nullopt;
  WindowSummary s;
  s.n = scores_.size();
  const double n = static_cast<double>(s.n);
  s.mean = std::accumulate(scores_.begin(), scores_.end(), 0.0) / n;
  s.top_share = static_cast<double>(std::count(scores_.begin(), scores_.end(), max_)) / n;
  s.bottom_share = static_cast<double>(std::count(scores_.begin(), scores_.end(), min_)) / n;
  // Distinct up to floating-point noise (0.39999999999999997 and 0.4 are one value): scores
  // are compared at 1e-9 of the scale's width.
  std::map<long long, int> values;
  const double width = max_ > min_ ? max_ - min_ : 1.0;
  for (double x : scores_) ++values[std::llround((x - min_) / width * 1e9)];
  s.distinct = static_cast<int>(values.size());
  const bool integer_scale =
      max_ - min_ <= 10 && std::floor(min_) == min_ && std::floor(max_) == max_ &&
      std::all_of(scores_.begin(), scores_.end(), [](double x) { return std::floor(x) == x; });
  const int levels = integer_scale ? static_cast<int>(max_ - min_) + 1 : 10;
  std::vector<int> counts(static_cast<std::size_t>(levels), 0);
  for (double x : scores_) {
    const int bin =
        integer_scale ? static_cast<int>(x - min_)
                      : std::min(levels - 1, static_cast<int>((x - min_) / (max_ - min_) * levels));
    ++counts[static_cast<std::size_t>(bin)];
  }
  double h = 0;
  for (int c : counts)
    if (c > 0) h -= (c / n) * std::log(c / n);
  s.entropy = levels > 1 ? h / std::log(static_cast<double>(levels)) : 0.0;
  s.lenient = s.n >= min_samples && s.top_share > leniency_max_ratio;
  return s;
}

void PairWindow::add(double x, double y, double now_s) {
  if (!std::isfinite(x) || !std::isfinite(y)) return;
  x_.push_back(x);
  y_.push_back(y);
  t_.push_back(now_s);
  if (x_.size() > capacity_) {
    x_.pop_front();
    y_.pop_front();
    t_.pop_front();
  }
  expire(now_s);
}

void PairWindow::expire(double now_s) {
  if (max_age_ <= 0) return;
  while (!t_.empty() && now_s - t_.front() > max_age_) {
    x_.pop_front();
    y_.pop_front();
    t_.pop_front();
  }
}

DriftDetector::DriftDetector(DriftOptions options) : options_(options) {}

void DriftDetector::add(double score, double now_s) {
  if (!std::isfinite(score)) return;
  if (!options_.rolling && !frozen_set_) {
    if (options_.baseline_seconds > 0) {
      if (!frozen_start_) frozen_start_ = now_s;
      if (now_s - *frozen_start_ < options_.baseline_seconds) {
        frozen_.push_back(score);
        return;
      }
      frozen_set_ = true;  // the baseline period is over: this score is a recent one
    } else {
      frozen_.push_back(score);
      if (frozen_.size() == options_.baseline_size) frozen_set_ = true;
      return;
    }
  }
  history_.push_back({score, now_s});
  trim(now_s);
}

std::optional<std::size_t> DriftDetector::recentStart(double now_s) const {
  if (options_.recent_seconds > 0) {
    const auto it = std::find_if(history_.begin(), history_.end(), [&](const Scored& s) {
      return now_s - s.t <= options_.recent_seconds;
    });
    const auto start = static_cast<std::size_t>(it - history_.begin());
    if (history_.size() - start < kMinDurationScores) return std::nullopt;
    return start;
  }
  if (history_.size() < options_.recent_size) return std::nullopt;
  return history_.size() - options_.recent_size;
}

void DriftDetector::trim(double now_s) {
  // Start of the recent region (full or not), then what the baseline needs before it.
  std::size_t b = 0;
  if (options_.recent_seconds > 0) {
    while (b < history_.size() && now_s - history_[b].t > options_.recent_seconds) ++b;
  } else if (history_.size() > options_.recent_size) {
    b = history_.size() - options_.recent_size;
  }
  std::size_t keep_from = b;
  if (!frozen_set_) {  // rolling: the baseline lives here too, just before the recent region
    if (options_.baseline_seconds > 0) {
      const double boundary = b < history_.size() ? history_[b].t : now_s - options_.recent_seconds;
      keep_from = 0;
      while (keep_from < b && history_[keep_from].t < boundary - options_.baseline_seconds)
        ++keep_from;
    } else {
      keep_from = b - std::min(b, options_.baseline_size);
    }
  }
  if (history_.size() - keep_from > kMaxHistory) keep_from = history_.size() - kMaxHistory;
  history_.erase(history_.begin(), history_.begin() + static_cast<long>(keep_from));
}

void DriftDetector::setBaseline(std::vector<double> scores) {
  frozen_ = std::move(scores);
  frozen_set_ = true;
  if (options_.recent_seconds <= 0)
    while (history_.size() > options_.recent_size) history_.pop_front();
}

std::optional<DriftResult> DriftDetector::evaluate(double now_s) const {
  const auto r = recentStart(now_s);
  if (!r) return std::nullopt;
  std::vector<double> baseline, recent;
  for (std::size_t i = *r; i < history_.size(); ++i) recent.push_back(history_[i].score);
  if (frozen_set_) {
    baseline = frozen_;
  } else if (!options_.rolling) {
    return std::nullopt;  // the frozen baseline is still filling
  } else if (options_.baseline_seconds > 0) {
    const double from = history_[*r].t - options_.baseline_seconds;
    for (std::size_t i = 0; i < *r; ++i)
      if (history_[i].t >= from) baseline.push_back(history_[i].score);
    if (baseline.size() < kMinDurationScores) return std::nullopt;
  } else {
    if (*r < options_.baseline_size) return std::nullopt;
    for (std::size_t i = *r - options_.baseline_size; i < *r; ++i)
      baseline.push_back(history_[i].score);
  }
  if (baseline.empty()) return std::nullopt;
  const auto test = mannWhitneyU(baseline, recent);
  if (!test) return std::nullopt;
  const double bm =
      std::accumulate(baseline.begin(), baseline.end(), 0.0) / static_cast<double>(baseline.size());
  const double rm =
      std::accumulate(recent.begin(), recent.end(), 0.0) / static_cast<double>(recent.size());
  return DriftResult{bm, rm, test->p_value,
                     test->p_value < options_.alpha && std::abs(rm - bm) >= options_.min_delta};
}

}  // namespace assay::stats
