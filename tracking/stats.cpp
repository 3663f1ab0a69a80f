#include "tracking/stats.hpp"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

namespace assay::stats {
namespace {

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

bool constant(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
}

}  // namespace

std::vector<double> averageRanks(const std::vector<double>& v) {
  const std::size_t n = v.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
  std::vector<double> ranks(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && v[order[j]] == v[order[i]]) ++j;
    const double avg = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k) ranks[order[k]] = avg;
    i = j;
  }
  return ranks;
}

std::optional<Correlation> spearman(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n != y.size() || n < 3 || constant(x) || constant(y)) return std::nullopt;
  const auto rx = averageRanks(x), ry = averageRanks(y);
  const double mx = mean(rx), my = mean(ry);
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  const double rho = std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
  const double dof = static_cast<double>(n) - 2.0;
  double p = 0.0;
  if (std::abs(rho) < 1.0) {
    const double t = rho * std::sqrt(dof / ((1.0 - rho) * (1.0 + rho)));
    p = 2.0 * boost::math::cdf(boost::math::complement(boost::math::students_t(dof), std::abs(t)));
  }
  return Correlation{rho, std::min(1.0, p)};
}

std::optional<double> spearmanRho(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2 || constant(x) || constant(y)) return std::nullopt;
  if (x.size() == 2) return (x[0] < x[1]) == (y[0] < y[1]) ? 1.0 : -1.0;  // neither is tied
  return spearman(x, y)->coefficient;
}

std::optional<double> kendallTauB(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n != y.size() || n < 2 || constant(x) || constant(y)) return std::nullopt;
  // Knight (1966), O(n log n), as scipy.stats.kendalltau: sort by (x, y); count the pairs tied
  // in x and tied in both; a merge sort by y counts the discordant pairs as its swaps.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return x[a] < x[b] || (x[a] == x[b] && y[a] < y[b]);
  });
  const auto pairs = [](long long t) { return t * (t - 1) / 2; };
  long long tied_x = 0, tied_xy = 0;
  for (std::size_t i = 0, run_x = 1, run_xy = 1; i < n; ++i) {
    const bool same_x = i + 1 < n && x[order[i + 1]] == x[order[i]];
    const bool same_xy = same_x && y[order[i + 1]] == y[order[i]];
    if (same_x) {
      ++run_x;
    } else {
      tied_x += pairs(static_cast<long long>(run_x));
      run_x = 1;
    }
    if (same_xy) {
      ++run_xy;
    } else {
      tied_xy += pairs(static_cast<long long>(run_xy));
      run_xy = 1;
    }
  }
  // Bottom-up merge sort of `order` by y; a swap is an element of the right half taken before
  // the elements left in the left half (strictly smaller y): one discordant pair each.
  long long swaps = 0;
  std::vector<std::size_t> buffer(n);
  for (std::size_t width = 1; width < n; width *= 2) {
    for (std::size_t lo = 0; lo < n; lo += 2 * width) {
      const std::size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      std::size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        if (y[order[j]] < y[order[i]]) {
          swaps += static_cast<long long>(mid - i);
          buffer[k++] = order[j++];
        } else {
          buffer[k++] = order[i++];
        }
      }
      while (i < mid) buffer[k++] = order[i++];
      while (j < hi) buffer[k++] = order[j++];
    }
    order.swap(buffer);
  }
  long long tied_y = 0;
  for (std::size_t i = 0, run = 1; i < n; ++i) {
    if (i + 1 < n && y[order[i + 1]] == y[order[i]]) {
      ++run;
    } else {
      tied_y += pairs(static_cast<long long>(run));
      run = 1;
    }
  }
  const long long n0 = pairs(static_cast<long long>(n));
  // concordant − discordant = (n0 − tied_x − tied_y + tied_xy) − 2 × discordant
  const long long difference = n0 - tied_x - tied_y + tied_xy - 2 * swaps;
  const double denom =
      std::sqrt(static_cast<double>(n0 - tied_x) * static_cast<double>(n0 - tied_y));
  if (denom == 0) return std::nullopt;
  return static_cast<double>(difference) / denom;
}

std::optional<double> cohenKappa(const std::vector<int>& a, const std::vector<int>& b,
                                 KappaWeights weights) {
  const std::size_t n = a.size();
  if (n == 0 || n != b.size()) return std::nullopt;
  std::map<int, std::size_t> index;
  for (int v : a) index.emplace(v, 0);
  for (int v : b) index.emplace(v, 0);
  std::size_t k = 0;
  for (auto& [label, i] : index) i = k++;
  std::vector<double> observed(k * k, 0.0), rows(k, 0.0), cols(k, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = index[a[i]], c = index[b[i]];
    observed[r * k + c] += 1;
    rows[r] += 1;
    cols[c] += 1;
  }
  double num = 0, den = 0;
  for (std::size_t r = 0; r < k; ++r) {
    for (std::size_t c = 0; c < k; ++c) {
      const double d = static_cast<double>(r) - static_cast<double>(c);
      const double w = weights == KappaWeights::kQuadratic ? d * d : (r == c ? 0.0 : 1.0);
      num += w * observed[r * k + c];
      den += w * rows[r] * cols[c] / static_cast<double>(n);
    }
  }
  if (den == 0) return std::nullopt;
  return 1.0 - num / den;
}

std::optional<MannWhitney> mannWhitneyU(const std::vector<double>& x,
                                        const std::vector<double>& y) {
  const std::size_t n1 = x.size(), n2 = y.size();
  if (n1 == 0 || n2 == 0) return std::nullopt;
  std::vector<double> all(x);
  all.insert(all.end(), y.begin(), y.end());
  const auto ranks = averageRanks(all);
  const double r1 = std::accumulate(ranks.begin(), ranks.begin() + static_cast<long>(n1), 0.0);
  const double fn1 = static_cast<double>(n1), fn2 = static_cast<double>(n2), n = fn1 + fn2;
  const double u1 = r1 - fn1 * (fn1 + 1) / 2.0;
  const double u2 = fn1 * fn2 - u1;
  // Tie correction: Σ (t³ − t) over groups of equal values.
  std::map<double, double> groups;
  for (double v : all) groups[v] += 1;
  double ties = 0;
  for (const auto& [v, t] : groups) ties += t * t * t - t;
  const double variance = fn1 * fn2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
  if (!(variance > 0)) return std::nullopt;
  const double mu = fn1 * fn2 / 2.0;
  const double z = (std::max(u1, u2) - mu - 0.5) / std::sqrt(variance);
  const double p = 2.0 * boost::math::cdf(boost::math::complement(boost::math::normal(), z));
  return MannWhitney{u1, std::clamp(p, 0.0, 1.0)};
}

std::optional<MeanInterval> meanInterval95(const std::vector<double>& v, double min_score,
                                           double max_score) {
  const std::size_t n = v.size();
  if (n < 2) return std::nullopt;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  const double sd = std::sqrt(ss / static_cast<double>(n - 1));
  const double q =
      boost::math::quantile(boost::math::students_t(static_cast<double>(n - 1)), 0.975);
  const double half = q * sd / std::sqrt(static_cast<double>(n));
  return MeanInterval{m, sd, n, std::clamp(m - half, min_score, max_score),
                      std::clamp(m + half, min_score, max_score)};
}

double binomialTestTwoSided(std::size_t k, std::size_t n, double p) {
  if (k > n || !(p > 0 && p < 1))
    throw std::invalid_argument("binomialTestTwoSided: needs k <= n and 0 < p < 1");
  if (n == 0) return 1.0;
  const boost::math::binomial_distribution<double> b(static_cast<double>(n), p);
  const double d = boost::math::pdf(b, static_cast<double>(k)) * (1 + 1e-7);
  double total = 0;
  for (std::size_t i = 0; i <= n; ++i)
    if (const double q = boost::math::pdf(b, static_cast<double>(i)); q <= d) total += q;
  return std::min(1.0, total);
}

std::optional<ChiSquare> chiSquareIndependence(const std::vector<std::vector<double>>& table) {
  std::vector<std::vector<double>> t;
  for (const auto& row : table)
    if (std::accumulate(row.begin(), row.end(), 0.0) > 0) t.push_back(row);
  if (t.size() < 2) return std::nullopt;
  const std::size_t cols = t.front().size();
  for (const auto& row : t)
    if (row.size() != cols) return std::nullopt;
  std::vector<std::size_t> keep;
  for (std::size_t c = 0; c < cols; ++c) {
    double s = 0;
    for (const auto& row : t) s += row[c];
    if (s > 0) keep.push_back(c);
  }
  if (keep.size() < 2) return std::nullopt;
  std::vector<double> row_sum(t.size(), 0), col_sum(keep.size(), 0);
  double total = 0;
  for (std::size_t r = 0; r < t.size(); ++r)
    for (std::size_t c = 0; c < keep.size(); ++c) {
      row_sum[r] += t[r][keep[c]];
      col_sum[c] += t[r][keep[c]];
      total += t[r][keep[c]];
    }
  double chi2 = 0, min_expected = total;
  std::size_t below_5 = 0;
  for (std::size_t r = 0; r < t.size(); ++r)
    for (std::size_t c = 0; c < keep.size(); ++c) {
      const double e = row_sum[r] * col_sum[c] / total;
      chi2 += (t[r][keep[c]] - e) * (t[r][keep[c]] - e) / e;
      min_expected = std::min(min_expected, e);
      below_5 += e < 5 ? 1 : 0;
    }
  const int dof = static_cast<int>((t.size() - 1) * (keep.size() - 1));
  const double p = boost::math::cdf(boost::math::complement(boost::math::chi_squared(dof), chi2));
  const double share = static_cast<double>(below_5) / static_cast<double>(t.size() * keep.size());
  return ChiSquare{chi2, dof, p, min_expected, share, share <= 0.2 && min_expected >= 1};
}

std::optional<double> rocAuc(const std::vector<double>& scores, const std::vector<bool>& labels) {
  const std::size_t n = scores.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return scores[a] < scores[b]; });
  // Average ranks (1-based) over ties, then U = R_pos − n_pos(n_pos + 1)/2.
  double rank_sum_pos = 0;
  std::size_t n_pos = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (std::size_t k = i; k < j; ++k) {
      if (labels[order[k]]) {
        rank_sum_pos += avg_rank;
        ++n_pos;
      }
    }
    i = j;
  }
  const std::size_t n_neg = n - n_pos;
  if (n_pos == 0 || n_neg == 0) return std::nullopt;
  const double u = rank_sum_pos - static_cast<double>(n_pos) * static_cast<double>(n_pos + 1) / 2.0;
  return u / (static_cast<double>(n_pos) * static_cast<double>(n_neg));
}

}  // namespace assay::stats
