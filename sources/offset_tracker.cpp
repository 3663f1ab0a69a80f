#include "sources/offset_tracker.hpp"

#include <algorithm>
#include <charconv>

namespace assay {

void OffsetTracker::applySkipsLocked() const {
  for (const auto& [partition, next] : skipped_) {
    auto& p = partitions_[partition];
    p.next = std::max(p.next, next);
  }
  skipped_.clear();
}

void OffsetTracker::begin(std::int32_t partition, std::int64_t offset) {
  std::lock_guard lock(mu_);
  applySkipsLocked();
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
  for (auto& [id, next] : skipped_) {
    if (id == partition) {
      next = std::max(next, offset + 1);
      return;
    }
  }
  skipped_.emplace_back(partition, offset + 1);
}

std::vector<std::pair<std::int32_t, std::int64_t>> OffsetTracker::takeAdvanced() {
  std::lock_guard lock(mu_);
  applySkipsLocked();
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
  applySkipsLocked();
  auto it = partitions_.find(partition);
  return it == partitions_.end() ? -1 : position(it->second);
}

void OffsetTracker::forget(const std::vector<std::int32_t>& partitions) {
  std::lock_guard lock(mu_);
  applySkipsLocked();
  for (auto id : partitions) {
    const auto it = partitions_.find(id);
    if (it == partitions_.end()) continue;
    if (it->second.replay_end >= 0) --replaying_;
    partitions_.erase(it);
  }
}

std::size_t OffsetTracker::pending() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [id, p] : partitions_) n += p.pending.size();
  return n;
}

std::vector<OffsetTracker::Commit> OffsetTracker::commits() const {
  std::lock_guard lock(mu_);
  applySkipsLocked();
  std::vector<Commit> out;
  for (const auto& [id, p] : partitions_)
    if (const auto pos = position(p); pos >= 0)
      out.push_back({id, pos, commitMetadata(pos, p.next, p.pending)});
  return out;
}

std::string OffsetTracker::commitMetadata(std::int64_t position, std::int64_t next,
                                          const std::set<std::int64_t>& pending) {
  if (position < 0 || next <= position + 1) return "";  // nothing finished above the position
  std::string gaps;
  std::int64_t end = next, previous = position;
  for (auto it = pending.upper_bound(position); it != pending.end(); ++it) {
    const std::string gap = " " + std::to_string(*it - previous);
    if (gaps.size() + gap.size() + 32 > kMaxMetadataBytes) {
      end = *it;  // the rest is not listed: treated as unfinished
      break;
    }
    gaps += gap;
    previous = *it;
  }
  if (end <= position + 1) return "";
  return "assay1 " + std::to_string(end - position) + gaps;
}

namespace {
/// Reads one decimal number ≥ 1 at `s`, advancing past it and one following space.
bool readCount(std::string_view& s, std::int64_t& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || out < 1) return false;
  s.remove_prefix(static_cast<std::size_t>(ptr - s.data()));
  if (!s.empty()) {
    if (s.front() != ' ') return false;
    s.remove_prefix(1);
  }
  return true;
}
}  // namespace

std::int64_t OffsetTracker::restore(std::int32_t partition, std::int64_t committed,
                                    std::string_view metadata) {
  constexpr std::string_view kTag = "assay1 ";
  if (committed < 0 || metadata.size() > 2 * kMaxMetadataBytes || !metadata.starts_with(kTag))
    return 0;
  metadata.remove_prefix(kTag.size());
  std::int64_t span = 0;
  if (!readCount(metadata, span) || span > (std::int64_t{1} << 40)) return 0;
  std::set<std::int64_t> unfinished{committed};
  std::int64_t at = committed;
  while (!metadata.empty()) {
    std::int64_t gap = 0;
    if (!readCount(metadata, gap) || gap >= span) return 0;
    at += gap;
    unfinished.insert(at);
  }
  if (at >= committed + span) return 0;
  std::lock_guard lock(mu_);
  applySkipsLocked();
  auto& p = partitions_[partition];
  if (p.replay_end < 0) ++replaying_;
  p.replay_from = committed;
  p.replay_end = committed + span;
  p.replay_unfinished = std::move(unfinished);
  return span - static_cast<std::int64_t>(p.replay_unfinished.size());
}

bool OffsetTracker::alreadyFinished(std::int32_t partition, std::int64_t offset) const {
  if (replaying_ == 0) return false;  // restore and forget run on this thread too
  std::lock_guard lock(mu_);
  const auto it = partitions_.find(partition);
  if (it == partitions_.end()) return false;
  const Partition& p = it->second;
  return offset >= p.replay_from && offset < p.replay_end && !p.replay_unfinished.contains(offset);
}

}  // namespace assay
