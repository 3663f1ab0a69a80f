#pragma once
/// The Kafka source (sources/source.hpp): the events topic read in a consumer group through
/// the configured input format (sources/format.hpp), the feedback topic beside it, the
/// embedded broker when kafka.brokers is "embedded", and the producer that --replay, the dead
/// letters and the results sink share. Offsets are stored and committed only over finished
/// messages (sources/offset_tracker.hpp).
///
/// Two modes, chosen at construction: a consumer in kafka.group_id (assayd), or a backfill
/// (assay backfill) that joins no group, commits nothing, reads the planned offset ranges only
/// and dead-letters nothing (the daemon did when it first read them).
///
/// Members are declared in dependency order: the consumer goes first (its final commit), then
/// the producer (whose last acknowledgements may finish offsets), the format (its message
/// references), the offset trackers, the broker last.

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "core/batched_counter.hpp"
#include "core/rate_limited_log.hpp"
#include "sources/client_stats.hpp"
#include "sources/consumer_stats.hpp"
#include "sources/format.hpp"
#include "sources/kafka.hpp"
#include "sources/offset_tracker.hpp"
#include "sources/source.hpp"

namespace assay {

class KafkaSource final : public Source {
 public:
  enum class Mode { kConsumerGroup, kBackfill };
  /// Starts the broker (embedded), the producer and the consumer (subscribed in
  /// kConsumerGroup mode). Its series go on `registry`; `version` is the assay_build_info
  /// label. Throws std::exception naming the cause (a property librdkafka rejects).
  KafkaSource(const Config& config, Mode mode, prometheus::Registry& registry,
              const std::string& version);
  ~KafkaSource() override;

  bool poll(int timeout_ms, Downstream& down, int max) override;
  void finish(const Origin& origin) override;
  std::size_t pending() const override { return offsets_.pending() + feedback_offsets_.pending(); }
  std::string notReady() const override;
  std::optional<std::chrono::steady_clock::time_point> lastActivity() const override {
    return last_activity_;
  }
  bool close() override { return consumer_.close(); }

  /// While the pipeline does not poll (back-pressure): one poll of a single message every
  /// max.poll.interval.ms / 4 keeps the group membership and serves rebalances. True when it
  /// polled.
  bool keepAlive(Downstream& down);
  /// Once a second: the format's gauges, whether a broker answers again, the lag and topic
  /// gauges, the feedback co-partitioning check.
  void refresh();
  /// The format's events still being assembled (OTLP traces waiting in the join).
  std::size_t assembling() const { return format_->assembling(); }
  /// The judges' JSON Pointer inputs changed (a reload rebuilt the judges).
  void setExtra(const std::vector<std::string>& pointers) { format_->setExtra(pointers); }
  /// librdkafka said every broker is down, and none has answered since.
  bool brokersDown() const { return brokers_down_.load(); }
  /// A fatal consumer error ended poll().
  bool failed() const { return failed_; }

  /// --replay: produces a JSON Lines file into kafka.topic through the format's encoder, and
  /// logs how many in how long. Returns the messages produced; throws std::runtime_error on
  /// I/O errors.
  std::size_t replayEvents(const std::string& path);
  /// --replay-feedback: into kafka.feedback_topic, keyed by `key_of(line)` ("" = no key).
  std::size_t replayFeedback(const std::string& path,
                             const std::function<std::string(const std::string&)>& key_of);

  // ---- assay backfill (Mode::kBackfill).
  /// The offsets of kafka.topic between two times (Unix epoch ms).
  std::vector<KafkaConsumer::Range> planBackfill(std::int64_t from_ms, std::int64_t to_ms);
  /// Reads `ranges`; a message at or past its range's end is skipped unread.
  void startBackfill(const std::vector<KafkaConsumer::Range>& ranges);
  /// Every range read to its end and nothing pending or being assembled.
  bool backfillDone() const;
  /// Messages of the ranges read so far, and in all.
  std::pair<std::int64_t, std::int64_t> backfillProgress() const {
    return {backfill_read_, backfill_total_};
  }

  // ---- Observers.
  const OffsetTracker& offsets() const { return offsets_; }
  bool assigned() const { return assigned_.load(); }
  /// The brokers this source talks to: kafka.brokers, or the embedded broker's address.
  const std::string& bootstrapServers() const { return bootstrap_; }
  const ConsumerStats& stats() const { return consumer_stats_; }
  rd_kafka_t* producerHandle() const { return producer_.handle(); }
  /// Serves the producer's delivery reports (results-topic tokens, dead letters).
  void pollProducer() { producer_.poll(); }
  /// Waits up to `timeout_ms` for every produced message's acknowledgement (shutdown); logs
  /// what is left.
  void flushProducer(int timeout_ms);
  std::chrono::steady_clock::time_point firstConsumedAt() const { return first_consumed_; }
  std::chrono::steady_clock::time_point lastEventAt() const { return last_message_[0]; }
  /// Times the consumer woke librdkafka's fetchers (KafkaConsumer::fetchNudges).
  std::uint64_t fetchWakeups() const { return consumer_.fetchNudges(); }
  std::chrono::steady_clock::time_point firstAssignedAt() const {
    return consumer_.firstAssignedAt();
  }
  /// The log lines suppressed since the last one of each kind, at shutdown.
  void logSuppressed();

 private:
  void handle(rd_kafka_message_t* m, Downstream& down);
  void handleEvent(const rd_kafka_message_t* m, Downstream& down);
  void handleFeedback(const rd_kafka_message_t* m, Downstream& down);
  /// Hands the decoded events to `down`; finishes the message that `read` did not hold.
  void deliver(Downstream& down, const MessageRef* at, bool held);
  void finishInvalid(const rd_kafka_message_t* m, const ParseOutcome& po);
  /// After each settled rebalance: whether the feedback of the events judged here reaches this
  /// instance (assay_feedback_copartitioned, a warning when not).
  void checkCopartition();

  const KafkaOptions& options_;
  const Mode mode_;
  ConsumerStats consumer_stats_;
  BatchedCounter consumed_{consumer_stats_.consumed};  // flushed at the end of each poll
  std::uint64_t fetch_wakeups_seen_ = 0;               // counted in fetch_wakeups (refresh)
  KafkaClientStats kafka_stats_;                       // fed by both clients' statistics callbacks
  std::unique_ptr<EmbeddedBroker> broker_;             // null unless kafka.brokers is "embedded"
  std::string bootstrap_;
  OffsetTracker offsets_, feedback_offsets_;
  std::unique_ptr<InputFormat> format_;
  KafkaProducer producer_;
  KafkaConsumer consumer_;
  std::vector<DecodedEvent> decoded_;  // reused
  // Status, read by the admin thread (notReady).
  std::atomic<bool> assigned_{false};
  std::atomic<bool> brokers_down_{false};
  std::atomic<std::int64_t> auth_failed_at_ns_{0};  // steady clock; 0 = never
  bool failed_ = false;
  RateLimitedLog invalid_log_, feedback_log_, kafka_log_;
  std::optional<std::chrono::steady_clock::time_point> last_activity_;
  std::chrono::steady_clock::time_point last_poll_{}, first_consumed_{};
  std::chrono::milliseconds keepalive_{75'000};  // max.poll.interval.ms / 4
  // Last message consumed from the events topic [0] and the feedback topic [1].
  std::array<std::chrono::steady_clock::time_point, 2> last_message_{
      std::chrono::steady_clock::now(), std::chrono::steady_clock::now()};
  // checkCopartition(): the rebalance count last seen, when it changed, and the last checked.
  std::uint64_t copartition_seen_ = 0, copartition_checked_ = 0;
  bool copartition_known_ = false;
  std::chrono::steady_clock::time_point copartition_changed_at_{};
  // assay backfill: per partition [from, to) and the next offset.
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> backfill_ranges_;
  std::map<std::int32_t, std::int64_t> backfill_next_;
  std::int64_t backfill_total_ = 0, backfill_read_ = 0;
  bool backfill_started_ = false;
};

}  // namespace assay
