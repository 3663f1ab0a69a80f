#pragma once
/// Statistics for watching judges (issue 4): rank correlation, agreement, two-sample tests,
/// confidence intervals and contingency tests. Each returns nullopt when the statistic is
/// undefined (too few values, a constant vector): never 0, 1 or NaN in its place.
/// Reference implementations and golden values: scipy.stats / sklearn.metrics
/// (tests/golden/stats_golden.py; tests agree to 1e-9).

#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

namespace assay::stats {

/// 1-based ranks, ties given the average of the ranks they span (scipy.stats.rankdata
/// "average").
std::vector<double> averageRanks(const std::vector<double>& v);

struct Correlation {
  double coefficient;  ///< in [-1, 1]
  double p_value;      ///< two-sided, in [0, 1]
};

/// Spearman's rho: Pearson correlation of the average ranks (so ties are handled; the
/// 1 − 6Σd²/(n(n²−1)) shortcut is wrong with ties). p-value from Student's t with n − 2 degrees of
/// freedom, t = rho·sqrt((n − 2)/(1 − rho²)), as scipy.stats.spearmanr. nullopt when n < 3,
/// sizes differ, or either vector is constant.
std::optional<Correlation> spearman(const std::vector<double>& x, const std::vector<double>& y);

/// Spearman's rho alone, defined from n = 2 (±1, as scipy.stats.spearmanr's statistic, whose
/// p-value is then nan): a bakeoff ranks 2 to 8 arms. nullopt when n < 2, sizes differ, or
/// either vector is constant.
std::optional<double> spearmanRho(const std::vector<double>& x, const std::vector<double>& y);

/// Kendall's tau-b (Kendall 1945): (concordant − discordant) / sqrt((n0 − n1)(n0 − n2)), with
/// n0 = n(n−1)/2 and n1, n2 the pairs tied in x and in y; scipy.stats.kendalltau(variant="b").
/// O(n log n) by Knight's algorithm (Knight 1966, "A computer method for calculating Kendall's
/// tau with ungrouped data", JASA 61; scipy's too). nullopt when n < 2, sizes differ, or a
/// vector is constant.
std::optional<double> kendallTauB(const std::vector<double>& x, const std::vector<double>& y);

enum class KappaWeights { kNone, kQuadratic };

/// Cohen's kappa between two raters' integer labels (Cohen 1960; quadratic weights: Cohen 1968),
/// as sklearn.metrics.cohen_kappa_score: categories = the sorted union of both raters' labels,
/// weights (i − j)² over category positions. nullopt when sizes differ, n = 0, or the expected
/// disagreement is 0 (one category only).
std::optional<double> cohenKappa(const std::vector<int>& a, const std::vector<int>& b,
                                 KappaWeights weights = KappaWeights::kNone);

struct MannWhitney {
  double u;        ///< U of the first sample, R1 − n1(n1 + 1)/2
  double p_value;  ///< two-sided
};

/// Mann–Whitney U test, two-sided, normal approximation with tie correction of the variance and
/// a continuity correction of 0.5 (scipy.stats.mannwhitneyu(method="asymptotic")). nullopt when
/// a sample is empty or every value is tied (zero variance).
std::optional<MannWhitney> mannWhitneyU(const std::vector<double>& x, const std::vector<double>& y);

struct MeanInterval {
  double mean, sd;  ///< sd: sample standard deviation (n − 1)
  std::size_t n;
  double low, high;  ///< 95 % interval: mean ± q·sd/√n, q = Student's t(0.975, n − 1), cut to
                     ///< the scale
};

/// The 95 % t-interval of the mean of `v` (scipy.stats.t.interval(0.95, n − 1, mean, sd/√n)),
/// cut to the scale [min_score, max_score]: a mean of scores on [0, 1] cannot lie outside it, so
/// neither does its interval. Student's t at every n (1.96, the normal value, is what t tends to:
/// 2.045 at n = 30, 1.984 at n = 100). nullopt when n < 2.
std::optional<MeanInterval> meanInterval95(
    const std::vector<double>& v, double min_score = -std::numeric_limits<double>::infinity(),
    double max_score = std::numeric_limits<double>::infinity());

/// Exact two-sided binomial test of k successes in n trials against probability p: the sum of
/// the probabilities of every outcome no more likely than k (scipy.stats.binomtest(k, n, p)
/// .pvalue, its relative tolerance 1 + 1e-7 included). Requires k ≤ n, 0 < p < 1; throws
/// std::invalid_argument otherwise. 1.0 for n = 0.
double binomialTestTwoSided(std::size_t k, std::size_t n, double p);

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
  /// The smallest expected count of the table tested, and the share of its cells whose expected
  /// count is below 5. The chi-squared approximation of the p-value is poor when that share
  /// exceeds 20 % or a count is below 1 (Cochran, "Some methods for strengthening the common
  /// χ² tests", Biometrics 1954): `reliable` is false then.
  double min_expected = 0;
  double share_below_5 = 0;
  bool reliable = true;
};

/// Pearson's chi-square test of independence on a rows × columns table of counts, without
/// Yates' correction (scipy.stats.chi2_contingency(correction=False)); the p-value from the
/// chi-squared distribution (Boost.Math). Rows or columns that sum to 0 are dropped first.
/// nullopt when fewer than 2 rows or columns remain.
std::optional<ChiSquare> chiSquareIndependence(const std::vector<std::vector<double>>& table);

/// Area under the ROC curve of `scores` for telling positives (label true) from negatives:
/// the Mann–Whitney U statistic / (n_pos · n_neg), ties counted one half (Hanley & McNeil,
/// Radiology 1982); equals sklearn.metrics.roc_auc_score. nullopt when a class is empty.
std::optional<double> rocAuc(const std::vector<double>& scores, const std::vector<bool>& labels);

}  // namespace assay::stats
