#include "daemon/offset_tracker.hpp"

#include <algorithm>

namespace assay {

void OffsetTracker::begin(std::int32_t partition, std::int64_t offset) {
  std::lock_guard lock(mu_);
  auto& p = partitions_[partition];
  p.pending.insert(offset);
  p.next = std::max(p.next, offset + 1);
}

void OffsetTracker::finish(std::int32_t partition, std::int64_t offset) {
  std::lock_guard lock(mu_);
  auto it = partitions_.find(partition);
  if (it != partitions_.end()) it->second.pending.erase(offset);
}

void OffsetTracker::skip(std::int32_t partition, std::int64_t offset) {
  std::lock_guard lock(mu_);
  auto& p = partitions_[partition];
  p.next = std::max(p.next, offset + 1);
}

std::vector<std::pair<std::int32_t, std::int64_t>> OffsetTracker::takeAdvanced() {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::int32_t, std::int64_t>> out;
  for (auto& [id, p] : partitions_) {
    const auto pos = position(p);
    if (pos > p.reported) {
      p.reported = pos;
      out.emplace_back(id, pos);
    }
  }
  return out;
}

std::int64_t OffsetTracker::committable(std::int32_t partition) const {
  std::lock_guard lock(mu_);
  auto it = partitions_.find(partition);
  return it == partitions_.end() ? -1 : position(it->second);
}

void OffsetTracker::forget(const std::vector<std::int32_t>& partitions) {
  std::lock_guard lock(mu_);
  for (auto id : partitions) partitions_.erase(id);
}

std::size_t OffsetTracker::pending() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [id, p] : partitions_) n += p.pending.size();
  return n;
}

}  // namespace assay
