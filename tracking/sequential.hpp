#pragma once
/// An anytime-valid test that users rate every arm of an A/B experiment alike: its error bound
/// holds however often it is looked at (after every rating), unlike a chi-square test checked
/// at every rating, whose false-positive rate under continuous monitoring is far above its
/// nominal level (tests/tracking/sequential_test.cpp measures both on A/A traffic).
///
/// Null hypothesis: the star distribution is the same in every arm, i.e. a rating's arm is
/// independent of its stars. The test bets on the arm of each new rating given its stars:
///
///   M_t = Π_{i ≤ t} p̂_{i−1}(arm_i | stars_i) / max_r Π_{i ≤ t} r(arm_i)
///
/// where p̂_{i−1}(a | s) = (n_{s,a} + ½) / (n_s + K/2) is the Krichevsky–Trofimov estimate from
/// the ratings before i (K arms), and the denominator is the null likelihood of the arms at its
/// maximum (r̂_t = each arm's share of the ratings so far). For any fixed arm shares r under the
/// null, Π p̂ / Π r is a nonnegative martingale with mean 1; dividing by the maximum only makes M
/// smaller, so M is an e-process and, by Ville's inequality, P(sup_t M_t ≥ 1/α) ≤ α under the
/// null, at every stopping time (Wasserman, Ramdas & Balakrishnan, "Universal inference", PNAS
/// 2020, section 7: the running-MLE likelihood ratio). The arms' shares need not be known: the
/// router's split and how often each arm's users rate drop out.
///
/// The anytime-valid p-value is min(1, 1 / sup_s M_s); it never increases.

#include <cstddef>
#include <vector>

namespace assay::stats {

class SequentialIndependenceTest {
 public:
  /// `arms` ≥ 2 arms, `levels` ≥ 2 outcome levels (5 for 1–5 stars). Throws
  /// std::invalid_argument otherwise.
  SequentialIndependenceTest(std::size_t arms, std::size_t levels);

  /// One rating: arm index in [0, arms), level index in [0, levels) (stars − 1). Out-of-range
  /// indexes throw std::out_of_range. O(arms) time.
  void add(std::size_t arm, std::size_t level);

  /// log M_t (natural log), 0 before any rating.
  double logE() const { return log_numerator_ - logNullMax(); }
  /// sup over s ≤ t of log M_s.
  double maxLogE() const { return max_log_e_; }
  /// min(1, 1 / sup M): the anytime-valid p-value, non-increasing in t.
  double pValue() const;
  /// sup M ≥ 1/α: the null is rejected at level α (then and at every later time).
  bool rejects(double alpha) const;
  std::size_t ratings() const { return total_; }

 private:
  double logNullMax() const;  // Σ_a n_a log(n_a / t)

  std::size_t arms_, levels_;
  std::vector<std::size_t> joint_;     // n_{s,a}, levels × arms
  std::vector<std::size_t> by_level_;  // n_s
  std::vector<std::size_t> by_arm_;    // n_a
  std::size_t total_ = 0;
  double log_numerator_ = 0;  // Σ log p̂(arm_i | stars_i)
  double max_log_e_ = 0;      // sup log M (M_0 = 1)
};

}  // namespace assay::stats
