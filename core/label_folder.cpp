#include "core/label_folder.hpp"

namespace assay {

std::string LabelFolder::fold(std::string_view value) {
  if (value.empty()) return "none";
  if (value.size() > kMaxLabelBytes) {  // cut without splitting a UTF-8 sequence
    std::size_t n = kMaxLabelBytes;
    while (n > 0 && (static_cast<unsigned char>(value[n]) & 0xC0) == 0x80) --n;
    value = value.substr(0, n);
  }
  std::lock_guard lock(mu_);
  if (seen_.find(value) != seen_.end()) return std::string(value);
  if (seen_.size() >= max_values_) return "other";
  seen_.emplace(std::string(value), true);
  return std::string(value);
}

}  // namespace assay
