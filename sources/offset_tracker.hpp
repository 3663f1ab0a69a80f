#pragma once
/// Which Kafka offsets may be committed. Events finish out of order (several workers, and the
/// results topic acknowledges asynchronously), but an offset may only be committed once every
/// earlier offset of its partition is finished, or a crash would skip unfinished events. Per
/// partition the tracker keeps the set of pending offsets; the committable position is the
/// lowest pending offset, or one past the highest offset seen when nothing is pending.
/// Threads: `finish` from any thread (workers, delivery reports); every other member from the
/// poll thread only. `skip` takes no lock: the poll thread keeps the highest offset it skipped
/// per partition and hands them over at its next begin, takeAdvanced, committable, commits,
/// forget or restore, so that an unsampled message costs no lock (a position read meanwhile by
/// `finish`'s thread is at most the one before those skips: lower, never past an event).
///
/// A clean stop (and a revoke) commits, with each position, Kafka commit metadata that lists
/// which offsets above the position were already finished (commitMetadata): an event finished
/// after an earlier one still waiting for its LLM verdict. The next owner of the partition
/// reads it back (restore) and skips those offsets (alreadyFinished) instead of judging and
/// writing them a second time (docs/ARCHITECTURE.md, "Delivery guarantee").

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace assay {

/// One Kafka message of the events topic.
struct MessageRef {
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  bool operator==(const MessageRef& o) const {
    return partition == o.partition && offset == o.offset;
  }
};

class OffsetTracker {
 public:
  /// A message was consumed; it is pending until `finish`.
  void begin(std::int32_t partition, std::int64_t offset);
  /// The event at (partition, offset) is done (sampled out, invalid, or judged and written).
  /// Unknown partitions (revoked meanwhile) are ignored.
  void finish(std::int32_t partition, std::int64_t offset);
  /// begin + finish at once, for messages finished on the poll thread (no lock: see above).
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

  /// One partition's commit: position as committable() and metadata as commitMetadata().
  struct Commit {
    std::int32_t partition;
    std::int64_t position;
    std::string metadata;
  };
  /// Every partition with something consumed, with its commit metadata.
  std::vector<Commit> commits() const;
  /// The commit metadata of a partition: "assay1 SPAN[ GAP…]" where the offsets
  /// [position, position + SPAN) are finished except position itself and the pending offsets
  /// given as gaps (each the distance from the previous pending offset). "" when nothing above
  /// the position is finished. At most kMaxMetadataBytes: when the pending offsets do not fit,
  /// SPAN ends at the last one listed (fewer offsets are skipped later, never a wrong one).
  static std::string commitMetadata(std::int64_t position, std::int64_t next,
                                    const std::set<std::int64_t>& pending);
  /// Brokers refuse longer metadata by default (offset.metadata.max.bytes = 4096).
  static constexpr std::size_t kMaxMetadataBytes = 4000;
  /// After an assignment: the partition's committed position and its commit metadata (any
  /// other metadata, or a malformed one, restores nothing). Returns how many offsets it marks
  /// as finished.
  std::int64_t restore(std::int32_t partition, std::int64_t committed, std::string_view metadata);
  /// True when the restored metadata says (partition, offset) was finished before. No lock
  /// while no partition it holds has a restored range (the usual case).
  bool alreadyFinished(std::int32_t partition, std::int64_t offset) const;

 private:
  struct Partition {
    std::set<std::int64_t> pending;
    std::int64_t next = -1;      // one past the highest offset begun
    std::int64_t reported = -1;  // last position returned by takeAdvanced
    // Restored from the commit metadata: [replay_from, replay_end) finished, except these.
    std::int64_t replay_from = -1, replay_end = -1;
    std::set<std::int64_t> replay_unfinished;
  };
  static std::int64_t position(const Partition& p) {
    return p.pending.empty() ? p.next : *p.pending.begin();
  }
  /// Applies the skips the poll thread kept (mu_ held).
  void applySkipsLocked() const;
  mutable std::mutex mu_;
  mutable std::map<std::int32_t, Partition> partitions_;
  /// Poll thread only: (partition, one past the highest offset skipped) not yet applied.
  mutable std::vector<std::pair<std::int32_t, std::int64_t>> skipped_;
  /// Partitions held with a restored range (alreadyFinished's lock-free test; poll thread).
  int replaying_ = 0;
};

}  // namespace assay
