#pragma once
/// Deterministic sampling by a hash of the request id (CONTRACT.md §5, "Sampling is a documented
/// function of the id"):
///   h = XXH3_64bits(UTF-8 bytes of id), seed 0 (xxHash ≥ 0.8);
///   sampled  iff h < rate × 2^64, rate = first matching rule's rate, else `sampling.rate`;
///   a judge with `rate: r` runs on a sampled event iff h < (r × rate) × 2^64.
/// The products are IEEE-754 doubles (r × rate rounded once, × 2^64 exact) compared exactly with
/// the 64-bit integer h; rate 1 samples everything, rate 0 nothing. Nested thresholds make every
/// judge's events a subset of those of any judge with a larger rate, so judges overlap.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace assay {

/// XXH3_64bits of `id` with seed 0.
std::uint64_t sampleHash(std::string_view id);

/// Exclusive upper bound T such that (h < T) ⟺ (h < rate × 2^64) for every 64-bit h.
/// rate is clamped to [0, 1]; rate ≥ 1 sets `all` (every h).
struct Threshold {
  bool all = false;
  std::uint64_t bound = 0;
  bool admits(std::uint64_t h) const { return all || h < bound; }
};
Threshold thresholdFor(double rate);

/// A sampling rule: the first rule whose every given field equals the event's wins.
struct SamplingRule {
  std::string tenant;  ///< empty = any tenant
  std::string app;     ///< empty = any app
  double rate = 0;     ///< [0, 1]
};

class Sampler {
 public:
  Sampler(double default_rate, std::vector<SamplingRule> rules);

  /// The rate that applies to an event of this tenant/app.
  double rateFor(std::string_view tenant, std::string_view app) const;

  /// Whether an event can possibly be sampled, knowing only its hash: false means it is
  /// not sampled whatever its tenant or app (so the event need not be parsed).
  bool maybeSampled(std::uint64_t h) const { return max_threshold_.admits(h); }

  bool sampled(std::uint64_t h, std::string_view tenant, std::string_view app) const;

  /// Whether a judge of rate `judge_rate` runs on a sampled event (nested sampling).
  static bool judgeRuns(std::uint64_t h, double event_rate, double judge_rate) {
    return thresholdFor(judge_rate * event_rate).admits(h);
  }

  bool hasRules() const { return !rules_.empty(); }

 private:
  double default_rate_;
  std::vector<SamplingRule> rules_;
  Threshold default_threshold_, max_threshold_;
};

}  // namespace assay
