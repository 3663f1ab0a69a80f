#include "sampling/sampler.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cmath>

namespace assay {

std::uint64_t sampleHash(std::string_view id) { return XXH3_64bits(id.data(), id.size()); }

Threshold thresholdFor(double rate) {
  if (!(rate > 0)) return Threshold{false, 0};  // also NaN
  if (rate >= 1) return Threshold{true, 0};
  // rate × 2^64 is exact in binary floating point; h < x ⟺ h < ceil(x) for integer h.
  const double x = std::ldexp(rate, 64);
  return Threshold{false, static_cast<std::uint64_t>(std::ceil(x))};
}

Sampler::Sampler(double default_rate, std::vector<SamplingRule> rules)
    : default_rate_(default_rate),
      rules_(std::move(rules)),
      default_threshold_(thresholdFor(default_rate)) {
  double max_rate = default_rate;
  for (const auto& r : rules_) max_rate = std::max(max_rate, r.rate);
  max_threshold_ = thresholdFor(max_rate);
}

double Sampler::rateFor(std::string_view tenant, std::string_view app) const {
  for (const auto& r : rules_) {
    if ((r.tenant.empty() || r.tenant == tenant) && (r.app.empty() || r.app == app)) return r.rate;
  }
  return default_rate_;
}

KeyScreen Sampler::screen(std::string_view key) const {
  if (key.empty()) return {};
  const std::uint64_t h = sampleHash(key);
  return KeyScreen{h, !maybeSampled(h)};
}

SampleDecision Sampler::decide(const KeyScreen& screen, const Event& event) const {
  SampleDecision d;
  d.hash = screen.hash ? *screen.hash : sampleHash(event.id);
  d.rate = rateFor(event.tenant, event.app);
  d.sampled = !screen.rejected && thresholdFor(d.rate).admits(d.hash);
  return d;
}

bool Sampler::sampled(std::uint64_t h, std::string_view tenant, std::string_view app) const {
  if (rules_.empty()) return default_threshold_.admits(h);
  return thresholdFor(rateFor(tenant, app)).admits(h);
}

}  // namespace assay
