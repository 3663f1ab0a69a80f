#pragma once
/// Deterministic sampling by a hash of the request id (docs/configuration.md, "Sampling is a
/// documented function of the id"):
///   h = XXH3_64bits(UTF-8 bytes of id), seed 0 (xxHash ≥ 0.8);
///   sampled  iff h < rate × 2^64, rate = first matching rule's rate, else `sampling.rate`;
///   a judge with `rate: r` runs on a sampled event iff h < (r × rate) × 2^64.
/// The products are IEEE-754 doubles (r × rate rounded once, × 2^64 exact) compared exactly with
/// the 64-bit integer h; rate 1 samples everything, rate 0 nothing. Nested thresholds make every
/// judge's events a subset of those of any judge with a larger rate, so judges overlap.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/options.hpp"
#include "core/event.hpp"

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

/// The sampling decision of one event.
struct SampleDecision {
  std::uint64_t hash = 0;  ///< XXH3_64 of the Kafka key when the message has one, else of the id
  double rate = 0;         ///< the event's rate: its first matching rule's, else sampling.rate
  bool sampled = false;    ///< hash < rate × 2^64
  /// Whether a judge with `rate: judge_rate` runs on this (sampled) event: the nested
  /// threshold hash < judge_rate × rate × 2^64.
  bool admits(double judge_rate) const { return thresholdFor(judge_rate * rate).admits(hash); }
};

/// What a message's Kafka key says before the message is parsed. Producers key events by
/// their id, so the key is the sampling hash key when present.
struct KeyScreen {
  std::optional<std::uint64_t> hash;  ///< XXH3_64 of the key; empty for a message without key
  /// True when no rule could sample this hash: the message is finished without being parsed.
  bool rejected = false;
};

class Sampler {
 public:
  Sampler(double default_rate, std::vector<SamplingRule> rules);

  /// The first step for every message: the key's hash, and whether the key alone rejects it.
  KeyScreen screen(std::string_view key) const;
  /// The second step, for a parsed event not rejected by screen(): the key's hash (or the
  /// id's when the message had no key) against the rate of the event's tenant and app.
  SampleDecision decide(const KeyScreen& screen, const Event& event) const;

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
