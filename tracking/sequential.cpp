#include "tracking/sequential.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace assay::stats {

SequentialIndependenceTest::SequentialIndependenceTest(std::size_t arms, std::size_t levels)
    : arms_(arms),
      levels_(levels),
      joint_(arms * levels, 0),
      by_level_(levels, 0),
      by_arm_(arms, 0) {
  if (arms < 2 || levels < 2)
    throw std::invalid_argument("SequentialIndependenceTest: at least 2 arms and 2 levels");
}

void SequentialIndependenceTest::add(std::size_t arm, std::size_t level) {
  if (arm >= arms_ || level >= levels_)
    throw std::out_of_range("SequentialIndependenceTest::add: arm or level out of range");
  // The bet, from the ratings before this one (predictable): Krichevsky–Trofimov.
  const double k = static_cast<double>(arms_);
  const double p = (static_cast<double>(joint_[level * arms_ + arm]) + 0.5) /
                   (static_cast<double>(by_level_[level]) + k / 2);
  log_numerator_ += std::log(p);
  ++joint_[level * arms_ + arm];
  ++by_level_[level];
  ++by_arm_[arm];
  ++total_;
  max_log_e_ = std::max(max_log_e_, logE());
}

double SequentialIndependenceTest::logNullMax() const {
  if (total_ == 0) return 0;
  const double t = static_cast<double>(total_);
  double l = 0;
  for (std::size_t n : by_arm_)
    if (n > 0) l += static_cast<double>(n) * std::log(static_cast<double>(n) / t);
  return l;
}

double SequentialIndependenceTest::pValue() const { return std::min(1.0, std::exp(-max_log_e_)); }

bool SequentialIndependenceTest::rejects(double alpha) const {
  return alpha > 0 && max_log_e_ >= -std::log(alpha);
}

}  // namespace assay::stats
