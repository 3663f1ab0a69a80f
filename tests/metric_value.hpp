#pragma once
// The value of a series in a registry, for tests that read metrics without a scrape.
#include <prometheus/registry.h>

#include <map>
#include <optional>
#include <string>

namespace assay::test {

/// The value of the first series of `name` whose labels include every one of `labels`
/// (counter or gauge), or nullopt.
inline std::optional<double> metricValue(prometheus::Registry& r, const std::string& name,
                                         const std::map<std::string, std::string>& labels) {
  for (const auto& f : r.Collect()) {
    if (f.name != name) continue;
    for (const auto& m : f.metric) {
      std::size_t matched = 0;
      for (const auto& l : m.label)
        if (auto it = labels.find(l.name); it != labels.end() && it->second == l.value) ++matched;
      if (matched != labels.size()) continue;
      return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return std::nullopt;
}

}  // namespace assay::test
