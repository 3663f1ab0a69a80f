#pragma once
/// Bounded label values for Prometheus series whose values come from events (tenant, app,
/// variant, annotator): docs/metrics.md, "Label values".

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace assay {

/// Bounds a label's cardinality: the first `max_values` distinct values keep their name, every
/// later one becomes "other" (docs/metrics.md). Empty values become "none"; values longer than
/// kMaxLabelBytes are cut there (at a UTF-8 boundary). Thread-safe.
class LabelFolder {
 public:
  static constexpr std::size_t kMaxLabelBytes = 128;
  explicit LabelFolder(std::size_t max_values) : max_values_(max_values) {}
  std::string fold(std::string_view value);

 private:
  std::size_t max_values_;
  std::mutex mu_;
  std::map<std::string, bool, std::less<>> seen_;
};

}  // namespace assay
