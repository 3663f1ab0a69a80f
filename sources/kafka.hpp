#pragma once
/// librdkafka plumbing: the embedded broker, the producer (replay, dead letters, results) and
/// the high-level consumer in a consumer group, with offsets stored only for finished events.

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <prometheus/counter.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "core/rate_limited_log.hpp"
#include "sources/client_stats.hpp"
#include "sources/offset_tracker.hpp"

namespace assay {

/// The producer's and the consumer's librdkafka configuration, exactly as start-up builds them:
/// assay's defaults, then kafka.properties verbatim, then the settings the delivery guarantee
/// needs. Throws ConfigurationError naming a property librdkafka refuses. The caller owns the
/// result (rd_kafka_new takes it, or rd_kafka_conf_destroy).
rd_kafka_conf_t* producerConf(const KafkaOptions& options, const std::string& bootstrap);
rd_kafka_conf_t* consumerConf(const KafkaOptions& options, const std::string& bootstrap);

/// Builds both clients as start-up does and destroys them at once, without any broker: what
/// librdkafka would refuse when assayd starts (a property no client accepts alone, such as
/// max.poll.interval.ms below session.timeout.ms, or an unreadable ssl.ca.location), it refuses
/// here. Returns librdkafka's message, or "" when both clients start.
std::string checkKafkaClients(const KafkaOptions& options);

/// librdkafka's mock cluster (rdkafka_mock.h) inside this process: a real Kafka protocol
/// endpoint on loopback TCP, alive as long as this object. Creates `topics` with `partitions`
/// partitions each. Throws std::runtime_error when it cannot start.
class EmbeddedBroker {
 public:
  EmbeddedBroker(int partitions, const std::vector<std::string>& topics);
  ~EmbeddedBroker();
  EmbeddedBroker(const EmbeddedBroker&) = delete;
  EmbeddedBroker& operator=(const EmbeddedBroker&) = delete;
  const std::string& bootstrapServers() const { return bootstrap_; }

 private:
  rd_kafka_t* owner_ = nullptr;  // the mock cluster lives as long as this handle
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  std::string bootstrap_;
};

/// Producer shared by --replay, the dead-letter copy and the results sink.
class KafkaProducer {
 public:
  /// Throws std::runtime_error naming the bad property.
  /// `stats` (optional, outliving the producer) receives librdkafka's statistics.
  KafkaProducer(const KafkaOptions& options, const std::string& bootstrap,
                KafkaClientStats* stats = nullptr);
  ~KafkaProducer();
  rd_kafka_t* handle() const { return rk_; }

  /// Turns one line of a JSON Lines file into a message: its key ("" = none) and value; false
  /// skips the line (logged with its number and `error`).
  using LineEncoder = std::function<bool(const std::string& line, std::string& key,
                                         std::string& value, std::string& error)>;
  /// Produces every non-empty line of a JSON Lines file to `topic` as `encode` makes it, and
  /// waits until all are acknowledged. `flag` names the option in messages. Returns the number
  /// of messages produced. Throws std::runtime_error on I/O errors.
  std::size_t replay(const std::string& path, const std::string& topic, const LineEncoder& encode,
                     const std::string& flag);

  /// The largest value copied to the dead-letter topic whole: 900,000 bytes, under the
  /// producer's `message.max.bytes` default (1,000,000) with room for key and headers.
  static constexpr std::size_t kMaxDeadLetterBytes = 900'000;
  /// Where a dead letter came from: its headers assay-source-topic, assay-source-partition,
  /// assay-source-offset (decimal), so that an operator can find the original.
  struct Source {
    std::string_view topic;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
  };
  /// Copies an invalid message to the dead-letter topic with header `assay-invalid-reason` and
  /// its Source's headers. A larger message is copied cut to its first kMaxDeadLetterBytes
  /// bytes, with header `assay-original-bytes` giving its size. `ok` is incremented once the
  /// broker acknowledges the copy, `errors` when it is refused at once or its delivery fails
  /// (then false is returned, or the delivery report counts it); both must outlive the producer.
  bool produceDeadLetter(const std::string& topic, const void* payload, std::size_t len,
                         const void* key, std::size_t key_len, std::string_view reason,
                         const Source& source, prometheus::Counter& ok,
                         prometheus::Counter& errors);

  void poll() { rd_kafka_poll(rk_, 0); }  ///< serves delivery reports
  void flush(int timeout_ms) { rd_kafka_flush(rk_, timeout_ms); }
  /// Messages produced and not yet acknowledged (or failed).
  int outstanding() const { return rd_kafka_outq_len(rk_); }

 private:
  rd_kafka_t* rk_ = nullptr;
};

/// High-level consumer in `kafka.group_id`. `enable.auto.offset.store=false`: only offsets that
/// the OffsetTracker reports as finished are stored, and auto-commit commits what was stored.
/// On revoke, finished offsets are stored and committed synchronously before the partitions go.
class KafkaConsumer {
 public:
  /// Subscribes to kafka.topic and, when `feedback` is given and kafka.feedback_topic is set, to
  /// the feedback topic too, in the same group: with librdkafka's default range assignor and
  /// both topics keyed by request id with the same partition count, an event and its feedback
  /// land on the same instance (co-partitioned), so the join by id works in a consumer group.
  /// Each topic's offsets go through its own tracker.
  /// `stats` (optional, outliving the consumer) receives librdkafka's statistics.
  /// With `subscribe` false (assay backfill) nothing is subscribed: assignRanges() assigns
  /// partitions at chosen offsets, and nothing is ever committed (no group is joined).
  KafkaConsumer(const KafkaOptions& options, const std::string& bootstrap, OffsetTracker& tracker,
                OffsetTracker* feedback = nullptr, KafkaClientStats* stats = nullptr,
                bool subscribe = true);
  ~KafkaConsumer();
  /// Called on the poll thread with the events topic's partitions a rebalance takes away,
  /// after their finished offsets are committed (the span join forgets their traces).
  void onRevoke(std::function<void(const std::vector<std::int32_t>&)> f) {
    on_revoke_ = std::move(f);
  }

  /// [from, to) offsets of one partition of kafka.topic.
  struct Range {
    std::int32_t partition = 0;
    std::int64_t from = 0, to = 0;
  };
  /// For each partition of kafka.topic, the first offset whose message timestamp is at or after
  /// `from_ms` and the first at or after `to_ms` (Unix epoch milliseconds), by librdkafka's
  /// offsets-for-times lookup (ListOffsets by timestamp); the high watermark when no message is
  /// that late. A broker that does not answer the lookup by timestamp (librdkafka's mock
  /// cluster) gets a binary search over the messages' timestamps instead (log2 of the partition's
  /// size reads per bound). Blocks up to `timeout_ms` per request. Throws std::runtime_error
  /// naming the cause. Before assignRanges() only.
  std::vector<Range> offsetsBetween(std::int64_t from_ms, std::int64_t to_ms,
                                    int timeout_ms = 10000);
  /// Backfill (subscribe false): consumes the non-empty ranges from their `from` offsets.
  void assignRanges(const std::vector<Range>& ranges);

  /// Next message or nullptr; caller destroys it with rd_kafka_message_destroy. Inline: on the
  /// path of every message (the wake-up's budget is a subtraction and a comparison).
  rd_kafka_message_t* poll(int timeout_ms) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, timeout_ms);
    if (m) {
      const std::size_t w = m->len > nudge_weight_ ? m->len : nudge_weight_;
      if (w >= nudge_left_)
        nudgeFetchers();
      else
        nudge_left_ -= w;
    }
    return m;
  }
  /// Times the fetchers were woken after a drained pre-fetch queue (FetchNudge, kafka.cpp).
  std::uint64_t fetchNudges() const;
  /// Stores the offsets that advanced in the tracker (called often by the poll thread).
  void storeFinishedOffsets();
  /// Every auto.commit.interval.ms (5 s by default; called often by the poll thread): commits,
  /// asynchronously, each partition's position with its commit metadata, if either changed.
  /// librdkafka's own auto-commit is off: it would commit without the metadata.
  void commitFinished();
  /// Stores the finished offsets, commits them with their commit metadata (OffsetTracker) and
  /// leaves the group, waiting at most `timeout` for each of the two, and logging every 5 s
  /// while it waits (an unreachable broker). Returns false when the final commit failed or
  /// did not finish in time (the events since the last successful commit are redelivered).
  /// Once only; later calls return the first result.
  bool close(std::chrono::milliseconds timeout = std::chrono::milliseconds(15000));
  /// True once the first assignment arrived (the consumer group joined).
  bool assigned() const { return assigned_.load(); }
  /// When the first assignment holding at least one partition arrived (steady clock; epoch
  /// before it): where scripts/bench times consumption from.
  std::chrono::steady_clock::time_point firstAssignedAt() const { return first_assigned_at_; }
  /// True while this member holds the assignment of the group's latest rebalance (possibly
  /// empty: more instances than partitions); false from a revoke that leaves it nothing (an
  /// eager rebalance, lost partitions) until the next assignment.
  bool inAssignment() const { return in_assignment_.load(); }
  /// True when `m` comes from the feedback topic.
  bool isFeedback(const rd_kafka_message_t* m) const;

  struct Lag {
    std::string topic;
    std::int32_t partition;
    std::int64_t messages;  ///< high watermark − consumed position, ≥ 0
  };
  /// Consumer lag of every assigned partition whose high watermark is known (librdkafka's
  /// cached fetch state: no broker round trip), from the position consumed, or before the
  /// first message from the committed offset read at assignment: 0 for a fully committed
  /// partition, also right after a restart or a rebalance.
  std::vector<Lag> lag() const;

  std::size_t assignedPartitions() const { return assigned_count_.load(); }
  /// True if a broker answers a metadata request within `timeout_ms` (blocks that long at
  /// most; called once a second while every broker is down).
  bool brokerAnswers(int timeout_ms) const;
  /// True once since the last call if librdkafka reported every broker down.
  bool takeAllBrokersDown() { return all_brokers_down_.exchange(false); }
  /// SASL or SSL authentication failures librdkafka reported since the last call (each is
  /// logged as an error).
  int takeAuthenticationFailures() { return auth_failures_.exchange(0); }
  /// Partitions assigned to this instance, of `topic`.
  std::size_t assignedPartitions(const std::string& topic) const;
  /// The partition numbers of `topic` assigned to this instance, ascending.
  std::vector<std::int32_t> assignedOf(const std::string& topic) const;
  /// `topic`'s partition count from the cluster's metadata (blocks `timeout_ms` at most); -1
  /// when unknown.
  int partitionCount(const std::string& topic, int timeout_ms) const;
  /// Rebalances served so far (assignments and revocations): the pipeline checks the
  /// co-partitioning of events and feedback after each.
  std::uint64_t rebalances() const { return rebalances_.load(); }

 private:
  static void rebalanceCb(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* partitions, void* opaque);
  /// librdkafka's client-level errors (served by poll): all brokers down sets a flag, the
  /// rest are logged as warnings (librdkafka already suppresses identical repeats).
  static void errorCb(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static int statsCb(rd_kafka_t* rk, char* json, std::size_t len, void* opaque);
  KafkaClientStats* stats_ = nullptr;
  void onRebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions);
  /// After an assignment: reads the committed offsets and their metadata (one broker round
  /// trip, at most 10 s), restores the trackers and keeps the offsets for lag().
  void readCommitted(const rd_kafka_topic_partition_list_t* partitions);
  /// Every tracked partition's position and commit metadata, for an explicit commit (with
  /// `only_changed`, those the broker has not acknowledged yet).
  rd_kafka_topic_partition_list_t* commitList(bool only_changed);
  /// Records what a commit result says the broker now has (`acked_`).
  void noteAcknowledged(rd_kafka_resp_err_t err, const rd_kafka_topic_partition_list_t* offsets);
  /// Offset commit results (asynchronous commits; served by poll): failures logged.
  /// Serves the results of periodic commits that came on commit_q_ (waiting up to `timeout_ms`
  /// for the first): acknowledged offsets noted, failures logged (commitCb).
  void servePeriodicCommits(int timeout_ms);
  static void commitCb(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                       rd_kafka_topic_partition_list_t* offsets, void* opaque);
  /// Serves `q` until `done()` or `timeout`, handing each event to `on_event` (it is destroyed
  /// after); logs `what` every 5 s while it waits.
  static void serveUntil(rd_kafka_queue_t* q, std::chrono::milliseconds timeout, const char* what,
                         const std::function<bool()>& done,
                         const std::function<void(rd_kafka_event_t*)>& on_event);

  rd_kafka_t* rk_ = nullptr;
  class FetchNudge;
  std::unique_ptr<FetchNudge> nudge_;  // before rk_ is destroyed, stopped (~KafkaConsumer)
  // Bytes left before the next wake-up, each message counting at least nudge_weight_ (poll).
  std::size_t nudge_left_ = 0, nudge_step_ = 0, nudge_weight_ = 1;
  /// The budget is spent: FetchNudge sends its requests; the budget starts again.
  void nudgeFetchers();
  std::string topic_, feedback_topic_;
  OffsetTracker& tracker_;
  OffsetTracker* feedback_tracker_ = nullptr;
  std::function<void(const std::vector<std::int32_t>&)> on_revoke_;
  OffsetTracker* trackerOf(const char* topic) const;
  // offsetsBetween's steps: the topic's partitions; the offsets-for-times lookup (-1: none);
  // the timestamp of the message at (or first after) an offset, for brokers without the lookup.
  std::vector<std::int32_t> partitionsOf(int timeout_ms) const;
  std::map<std::int32_t, std::int64_t> offsetsForTime(const std::vector<std::int32_t>& partitions,
                                                      std::int64_t ms, int timeout_ms) const;
  std::int64_t timestampAt(std::int32_t partition, std::int64_t offset, int timeout_ms);
  std::atomic<bool> assigned_{false};
  std::chrono::steady_clock::time_point first_assigned_at_{};  // the poll thread's
  std::atomic<bool> in_assignment_{false};
  bool cooperative_sticky_ = false;  // partition.assignment.strategy names it (~KafkaConsumer)
  std::atomic<std::size_t> assigned_count_{0};
  std::atomic<std::uint64_t> rebalances_{0};
  bool closed_ = false;
  bool close_result_ = true;
  bool closing_ = false;    // close() committed: a revoke commits nothing more
  bool subscribed_ = true;  // false: assay backfill (assigned ranges, never commits)
  std::atomic<bool> all_brokers_down_{false};
  std::atomic<int> auth_failures_{0};
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> committed_;  // poll thread
  // The last position and metadata the broker acknowledged, per partition (poll thread).
  std::map<std::pair<std::string, std::int32_t>, std::pair<std::int64_t, std::string>> acked_;
  std::chrono::milliseconds commit_interval_{5000};
  std::chrono::steady_clock::time_point last_periodic_commit_{};
  // Periodic commits' results (servePeriodicCommits), and how many are awaited (poll thread).
  rd_kafka_queue_t* commit_q_ = nullptr;
  int commits_in_flight_ = 0;
  RateLimitedLog commit_log_;
};

}  // namespace assay
