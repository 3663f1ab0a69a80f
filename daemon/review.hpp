#pragma once
/// The human review loop's routing (docs/review.md): judgments a human should look at go to a
/// review file (JSON Lines, appended) and/or a Kafka topic (one message per event, keyed by its
/// id), one line per event with the event, its judgment and why:
///   - `below_threshold`: a configured judge scored it below its `below`;
///   - `random_share`: else, a share of the judge's scored verdicts, chosen by XXH3 of
///     (judge, event id): the same share of every tenant's events (stratified by tenant), and
///     the same choice when the event is judged again;
/// at most review.max_per_hour events per judge and clock hour (the rest counted, skipped).
///   assay_review_routed_total{judge, reason}   routed verdicts
///   assay_review_skipped_total{judge, reason}  hourly_cap; no_event (the event was not kept:
///                                              more than kMaxKept judged at once)
///   assay_review_written_total{output}         lines the file took (output="file") or the
///                                              broker acknowledged (output="topic")
///   assay_review_write_errors_total{output}    lines the file did not take, or the producer
///                                              refused or the broker did not acknowledge
/// Thread-safe: remember() on a worker when an event starts judging, route() where its judgment
/// completes.

#include <librdkafka/rdkafka.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "config/options.hpp"
#include "core/event.hpp"
#include "core/judgment.hpp"

namespace assay {

/// The review file's line for `event` (docs/review.md): {"reviewed_at", "reasons": [{judge,
/// judge_version, reason, score, threshold}], "event": {...}, "judgment": {...}}.
std::string reviewLine(const Event& event, const Judgment& judgment,
                       const std::string& reasons_json, std::int64_t now_ms);

class ReviewRouter {
 public:
  /// Events kept while they are judged, at most.
  static constexpr std::size_t kMaxKept = 100'000;

  /// Opens review.path for appending (created with its folder) when set. review.topic, when
  /// set, is produced to with `producer`, whose dr_msg_cb must be
  /// KafkaResultsSink::deliveryReport and which must outlive this router's messages (its
  /// owner flushes it); `registry` must outlive the producer. Throws std::runtime_error naming
  /// the file when it cannot be opened, or the topic when there is no producer.
  ReviewRouter(const ReviewOptions& options, prometheus::Registry& registry,
               rd_kafka_t* producer = nullptr);
  ~ReviewRouter();
  ReviewRouter(const ReviewRouter&) = delete;
  ReviewRouter& operator=(const ReviewRouter&) = delete;

  /// An event starts judging: kept until its judgment (a copy).
  void remember(const Event& event);
  /// Its judgment: routed or not; the event is let go. `now_ms` Unix milliseconds.
  void route(const Judgment& judgment, std::int64_t now_ms);
  /// An event whose judgment will not come (dropped at the stop): let go.
  void forget(const std::string& id);

 private:
  ReviewOptions options_;
  prometheus::Family<prometheus::Counter>& routed_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Counter>& written_;
  prometheus::Family<prometheus::Counter>& write_errors_;
  prometheus::Counter& file_ok_;
  prometheus::Counter& file_errors_;
  prometheus::Counter& topic_ok_;
  prometheus::Counter& topic_errors_;
  rd_kafka_t* producer_;
  std::mutex mu_;
  std::unordered_map<std::string, Event> events_;             // by id
  std::map<std::string, std::pair<std::int64_t, int>> hour_;  // judge → (hour, routed in it)
  std::FILE* file_ = nullptr;                                 // null: no review.path

  void write(const std::string& id, const std::string& line);
};

}  // namespace assay
