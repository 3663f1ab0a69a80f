#pragma once
/// Which Kafka offsets may be committed. Events finish out of order (several workers, and the
/// results topic acknowledges asynchronously), but an offset may only be committed once every
/// earlier offset of its partition is finished, or a crash would skip unfinished events. Per
/// partition the tracker keeps the set of pending offsets; the committable position is the
/// lowest pending offset, or one past the highest offset seen when nothing is pending.
/// Thread-safe: the poll thread calls begin/take, workers and delivery reports call finish.

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace assay {

class OffsetTracker {
 public:
  /// A message was consumed; it is pending until `finish`.
  void begin(std::int32_t partition, std::int64_t offset);
  /// The event at (partition, offset) is done (sampled out, invalid, or judged and written).
  /// Unknown partitions (revoked meanwhile) are ignored.
  void finish(std::int32_t partition, std::int64_t offset);
  /// begin + finish at once, for messages finished on the poll thread.
  void skip(std::int32_t partition, std::int64_t offset);

  /// Positions (next offset to consume, as Kafka commits them) that advanced since the last
  /// call, per partition.
  std::vector<std::pair<std::int32_t, std::int64_t>> takeAdvanced();

  /// Committable position of one partition, or -1 when nothing was consumed there.
  std::int64_t committable(std::int32_t partition) const;

  /// Forgets partitions (on revoke); later finishes for them are ignored.
  void forget(const std::vector<std::int32_t>& partitions);

  /// Events begun and not finished, over every partition.
  std::size_t pending() const;

 private:
  struct Partition {
    std::set<std::int64_t> pending;
    std::int64_t next = -1;      // one past the highest offset begun
    std::int64_t reported = -1;  // last position returned by takeAdvanced
  };
  static std::int64_t position(const Partition& p) {
    return p.pending.empty() ? p.next : *p.pending.begin();
  }
  mutable std::mutex mu_;
  std::map<std::int32_t, Partition> partitions_;
};

}  // namespace assay
