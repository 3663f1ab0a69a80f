// The Kafka source: one poll turn (messages through the format to the downstream, the
// committed position over finished messages), the feedback topic, dead letters, backfill.
#include "sources/kafka_source.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <thread>

#include "core/clock.hpp"
#include "core/log_text.hpp"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<EmbeddedBroker> embeddedBroker(const Config& config) {
  const KafkaOptions& k = config.kafka;
  if (k.brokers != "embedded") return nullptr;
  auto broker = std::make_unique<EmbeddedBroker>(
      k.partitions, std::vector<std::string>{k.topic, k.results_topic, k.dead_letter_topic,
                                             k.feedback_topic, config.review.topic});
  spdlog::info(
      "kafka: embedded broker (librdkafka mock cluster) at {}, topic '{}' with {} partitions",
      broker->bootstrapServers(), k.topic, k.partitions);
  return broker;
}

std::vector<std::string> topicsOf(const KafkaOptions& k) {
  std::vector<std::string> out{k.topic};
  if (!k.feedback_topic.empty()) out.push_back(k.feedback_topic);
  return out;
}

std::string_view keyOf(const rd_kafka_message_t* m) {
  return {static_cast<const char*>(m->key), m->key ? m->key_len : 0};
}

std::string_view payloadOf(const rd_kafka_message_t* m) {
  return {static_cast<const char*>(m->payload), m->len};
}

std::string partitionList(const std::vector<std::int32_t>& v) {
  std::string out;
  for (const auto p : v) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return "[" + out + "]";
}

}  // namespace

KafkaSource::KafkaSource(const Config& config, Mode mode, prometheus::Registry& registry,
                         const std::string& version)
    : options_(config.kafka),
      mode_(mode),
      consumer_stats_(registry, topicsOf(config.kafka), version),
      kafka_stats_(registry),
      broker_(embeddedBroker(config)),
      bootstrap_(broker_ ? broker_->bootstrapServers() : config.kafka.brokers),
      format_(makeInputFormat(config, registry)),
      producer_(config.kafka, bootstrap_, &kafka_stats_),
      consumer_(config.kafka, bootstrap_, offsets_,
                mode == Mode::kBackfill ? nullptr : &feedback_offsets_, &kafka_stats_,
                mode == Mode::kConsumerGroup) {
  consumer_.onRevoke([this](const std::vector<std::int32_t>& p) { format_->forget(p); });
  for (const auto& [key, value] : config.kafka.properties)  // checked by the loader
    if (key == "max.poll.interval.ms")
      keepalive_ = std::chrono::milliseconds(std::stoll(value) / 4);
  if (const std::string line = format_->describe(); !line.empty()) spdlog::info("{}", line);
  if (!config.kafka.feedback_topic.empty())
    spdlog::info("kafka: feedback from '{}' (ratings and annotations, joined by id)",
                 config.kafka.feedback_topic);
}

KafkaSource::~KafkaSource() = default;

bool KafkaSource::poll(int timeout_ms, Downstream& down, int max) {
  for (int n = 0; n < max && !down.holding(); ++n) {
    rd_kafka_message_t* m = consumer_.poll(n == 0 ? timeout_ms : 0);
    last_poll_ = Clock::now();
    if (!m) break;
    const bool fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
    if (fatal) {
      spdlog::critical("kafka: fatal consumer error: {}; stopping", rd_kafka_message_errstr(m));
      failed_ = true;
    } else {
      handle(m, down);
    }
    rd_kafka_message_destroy(m);
    if (fatal) {
      consumed_.flush();
      return false;
    }
  }
  consumed_.flush();
  format_->expire(decoded_);  // events whose assembly timed out
  if (!decoded_.empty()) deliver(down, nullptr, true);
  producer_.poll();  // delivery reports: results-topic tokens, dead letters
  if (consumer_.takeAllBrokersDown() && !brokers_down_) {
    brokers_down_ = true;
    consumer_stats_.brokers_reachable.Set(0);
    kafka_stats_.allBrokersDown();
    spdlog::warn("kafka: no broker answers ({}); /readyz says 503 until one does",
                 options_.brokers);
  }
  if (const int n = consumer_.takeAuthenticationFailures(); n > 0) {
    consumer_stats_.authentication_failures.Increment(n);
    auth_failed_at_ns_ = steadyNs();
  }
  if (consumer_.assigned() && !last_activity_)
    last_activity_ = Clock::now();  // the idle timer starts at the first assignment
  assigned_ = consumer_.inAssignment();
  consumer_.storeFinishedOffsets();
  consumer_.commitFinished();
  return true;
}

bool KafkaSource::keepAlive(Downstream& down) {
  // No consumer poll while the pipeline holds back: librdkafka's pre-fetch queue fills up to
  // queued.max.messages.kbytes and its fetcher stops by itself (rd_kafka_pause_partitions was
  // tried and, on librdkafka 2.0, a partition resumed right after its pause could stay without
  // a fetcher for good). The message this poll returns is handed on like the others.
  if (Clock::now() - last_poll_ < keepalive_) return false;
  last_poll_ = Clock::now();
  if (rd_kafka_message_t* m = consumer_.poll(0)) {
    handle(m, down);
    rd_kafka_message_destroy(m);
  }
  consumed_.flush();
  return true;
}

void KafkaSource::handle(rd_kafka_message_t* m, Downstream& down) {
  if (m->err) {
    long suppressed = 0;
    if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && kafka_log_.allow(suppressed))
      spdlog::warn("kafka: {}{}", rd_kafka_message_errstr(m), RateLimitedLog::note(suppressed));
    return;
  }
  last_activity_ = last_poll_;  // the poll that returned it, just now
  const bool feedback = consumer_.isFeedback(m);
  last_message_[feedback ? 1 : 0] = *last_activity_;
  if (feedback)
    handleFeedback(m, down);
  else
    handleEvent(m, down);
}

void KafkaSource::handleEvent(const rd_kafka_message_t* m, Downstream& down) {
  if (mode_ == Mode::kBackfill) {  // only the planned range of each partition is read
    const auto it = backfill_ranges_.find(m->partition);
    if (it == backfill_ranges_.end() || m->offset >= it->second.second ||
        m->offset < it->second.first) {
      offsets_.skip(m->partition, m->offset);
      return;  // outside the plan: not an event of this run (not counted as consumed)
    }
    ++backfill_read_;
    backfill_next_[m->partition] = m->offset + 1;
  }
  if (first_consumed_ == Clock::time_point{}) first_consumed_ = Clock::now();
  consumed_.add();
  if (offsets_.alreadyFinished(m->partition, m->offset)) {  // judged and written before
    consumer_stats_.replay_skipped.Increment();
    offsets_.skip(m->partition, m->offset);
    return down.ended(Downstream::Ended::kReplaySkipped);
  }
  const MessageRef at{m->partition, m->offset};
  const InputFormat::Read read = format_->read(
      {payloadOf(m), keyOf(m), at, options_.topic},
      [&down](std::string_view key) { return down.screen(key); }, decoded_);
  if (!read.ok) {
    finishInvalid(m, read.invalid);
    return down.ended(Downstream::Ended::kInvalid);
  }
  if (read.screened_out) down.ended(Downstream::Ended::kScreenedOut);
  if (read.held) offsets_.begin(at.partition, at.offset);  // held by events being assembled
  deliver(down, &at, read.held);
}

void KafkaSource::deliver(Downstream& down, const MessageRef* at, bool held) {
  bool this_message = false;
  for (auto& d : decoded_) {
    Origin origin;
    if (d.messages.empty()) {  // the message being read is the event
      this_message = true;
      origin.partition = at->partition;
      origin.offset = at->offset;
      offsets_.begin(at->partition, at->offset);  // before a worker can finish it
    } else {
      origin.messages = std::move(d.messages);
    }
    if (!d.event) {  // left without an event (counted by the format)
      finish(origin);
      continue;
    }
    if (!down.onEvent(std::move(*d.event), d.screen, origin)) finish(origin);
  }
  decoded_.clear();
  if (at && !held && !this_message) offsets_.skip(at->partition, at->offset);
}

void KafkaSource::finish(const Origin& origin) {
  if (origin.messages.empty()) return offsets_.finish(origin.partition, origin.offset);
  for (const auto& m : origin.messages)
    if (format_->release(m)) offsets_.finish(m.partition, m.offset);
}

void KafkaSource::finishInvalid(const rd_kafka_message_t* m, const ParseOutcome& po) {
  consumer_stats_.invalid[static_cast<int>(po.reason)]->Increment();
  long suppressed = 0;
  if (invalid_log_.allow(suppressed)) {
    const auto key = keyOf(m);
    spdlog::warn(
        "invalid message at topic {} partition {} offset {}{}: {}: {}{}", options_.topic,
        m->partition, m->offset, key.empty() ? "" : fmt::format(" (key '{}')", logText(key, 64)),
        invalidReasonName(po.reason), logText(po.detail), RateLimitedLog::note(suppressed));
  }
  // A backfill reads messages the daemon already consumed, and dead-lettered then: not again.
  if (!options_.dead_letter_topic.empty() && mode_ != Mode::kBackfill) {
    const KafkaProducer::Source source{m->rkt ? rd_kafka_topic_name(m->rkt) : "", m->partition,
                                       m->offset};
    producer_.produceDeadLetter(options_.dead_letter_topic, m->payload, m->len, m->key, m->key_len,
                                invalidReasonName(po.reason), source, consumer_stats_.dead_lettered,
                                consumer_stats_.dead_letter_errors);
  }
  offsets_.skip(m->partition, m->offset);
}

void KafkaSource::handleFeedback(const rd_kafka_message_t* m, Downstream& down) {
  if (const std::string error = down.onFeedback(payloadOf(m), keyOf(m), m->partition);
      !error.empty()) {
    long suppressed = 0;
    if (feedback_log_.allow(suppressed))
      spdlog::warn("invalid feedback at topic {} partition {} offset {}: {}{}",
                   options_.feedback_topic, m->partition, m->offset, logText(error),
                   RateLimitedLog::note(suppressed));
  }
  feedback_offsets_.skip(m->partition, m->offset);
}

std::string KafkaSource::notReady() const {
  if (const auto at = auth_failed_at_ns_.load(); at && steadyNs() - at < 60'000'000'000)
    return "Kafka authentication failed in the last minute (kafka.properties sasl.* / ssl.*)";
  if (brokers_down_) return "no Kafka broker answers (kafka.brokers: " + bootstrap_ + ")";
  if (!assigned_) return "waiting for the Kafka partition assignment (joining the consumer group)";
  return "";
}

void KafkaSource::refresh() {
  format_->refresh();
  if (brokers_down_ && consumer_.brokerAnswers(200)) {
    brokers_down_ = false;
    consumer_stats_.brokers_reachable.Set(1);
    if (last_activity_) last_activity_ = Clock::now();  // the idle timer restarts
    spdlog::info("kafka: a broker answers again");
  }
  consumer_stats_.setLag(consumer_.lag());
  const std::uint64_t wakeups = consumer_.fetchNudges();
  consumer_stats_.fetch_wakeups.Increment(static_cast<double>(wakeups - fetch_wakeups_seen_));
  fetch_wakeups_seen_ = wakeups;
  checkCopartition();
  const auto now = Clock::now();
  const auto topics = topicsOf(options_);
  for (std::size_t i = 0; i < topics.size(); ++i)
    consumer_stats_.setTopic(i, std::chrono::duration<double>(now - last_message_[i]).count(),
                             consumer_.assignedPartitions(topics[i]));
}

void KafkaSource::checkCopartition() {
  if (options_.feedback_topic.empty() || mode_ == Mode::kBackfill) return;
  const std::uint64_t n = consumer_.rebalances();
  const auto now = Clock::now();
  if (n != copartition_seen_) {  // wait for the assignment to settle (a cooperative rebalance
    copartition_seen_ = n;       // revokes, then assigns, in separate steps)
    copartition_changed_at_ = now;
    return;
  }
  if (n == copartition_checked_ || now - copartition_changed_at_ < std::chrono::seconds(10)) return;
  const auto events = consumer_.assignedOf(options_.topic);
  const auto feedback = consumer_.assignedOf(options_.feedback_topic);
  if (events.empty()) return;  // nothing judged here, nothing to join
  const int ne = consumer_.partitionCount(options_.topic, 2000);
  const int nf = consumer_.partitionCount(options_.feedback_topic, 2000);
  if (ne < 0 || nf < 0) return;  // no metadata now: the next refresh asks again
  copartition_checked_ = n;
  const bool everything =
      static_cast<int>(events.size()) == ne && static_cast<int>(feedback.size()) == nf;
  const bool ok = everything || (ne == nf && events == feedback);
  const bool first = !copartition_known_, was = consumer_stats_.feedback_copartitioned.Value() == 1;
  copartition_known_ = true;
  consumer_stats_.feedback_copartitioned.Set(ok ? 1 : 0);
  if (ok && (first || !was))
    spdlog::info(
        "kafka: feedback co-partitioned{}: events partitions {} of {}, feedback "
        "partitions {} of {}",
        first ? "" : " again", partitionList(events), ne, partitionList(feedback), nf);
  if (ok) return;
  spdlog::warn(
      "kafka: feedback is not co-partitioned with the events on this instance: it consumes "
      "events partitions {} of {} and feedback partitions {} of {}; ratings and annotations of "
      "the events judged here reach other instances and are never joined (counted unmatched "
      "there). Feedback is joined on the instance that judged its event: give both topics the "
      "same partition count, key feedback by the event id with the events' partitioner, and set "
      "kafka.properties partition.assignment.strategy: range (it gives partition p of both "
      "topics to one instance; cooperative-sticky and roundrobin do not)",
      partitionList(events), ne, partitionList(feedback), nf);
}

std::size_t KafkaSource::replayEvents(const std::string& path) {
  // The embedded broker (librdkafka's mock cluster) keeps about 5 MB per partition: a larger
  // replay loses its oldest messages before they are consumed.
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (broker_ && !ec && bytes > static_cast<std::uintmax_t>(options_.partitions) * (4u << 20))
    spdlog::warn(
        "--replay: '{}' is {:.0f} MB; the embedded broker keeps about 5 MB per partition "
        "(kafka.partitions: {}), so the oldest messages may be gone before they are consumed: "
        "raise kafka.partitions or use a real broker",
        path, static_cast<double>(bytes) / 1e6, options_.partitions);
  const auto t0 = Clock::now();
  const auto n = producer_.replay(
      path, options_.topic,
      [this](const std::string& line, std::string& key, std::string& value, std::string& error) {
        return format_->encodeLine(line, key, value, error);
      },
      "--replay");
  spdlog::info("replay: produced {} message(s) from '{}' into '{}' in {:.2f} s", n, path,
               options_.topic, std::chrono::duration<double>(Clock::now() - t0).count());
  return n;
}

std::size_t KafkaSource::replayFeedback(
    const std::string& path, const std::function<std::string(const std::string&)>& key_of) {
  const auto n = producer_.replay(
      path, options_.feedback_topic,
      [&key_of](const std::string& line, std::string& key, std::string& value, std::string&) {
        key = key_of(line);
        value = line;
        return true;
      },
      "--replay-feedback");
  spdlog::info("replay: produced {} feedback message(s) from '{}' into '{}'", n, path,
               options_.feedback_topic);
  return n;
}

std::vector<KafkaConsumer::Range> KafkaSource::planBackfill(std::int64_t from_ms,
                                                            std::int64_t to_ms) {
  return consumer_.offsetsBetween(from_ms, to_ms);
}

void KafkaSource::startBackfill(const std::vector<KafkaConsumer::Range>& ranges) {
  for (const auto& r : ranges) {
    if (r.to <= r.from) continue;
    backfill_ranges_[r.partition] = {r.from, r.to};
    backfill_next_[r.partition] = r.from;
    backfill_total_ += r.to - r.from;
  }
  backfill_started_ = true;
  consumer_.assignRanges(ranges);
  last_activity_ = Clock::now();
}

bool KafkaSource::backfillDone() const {
  if (!backfill_started_) return false;
  for (const auto& [partition, range] : backfill_ranges_)
    if (backfill_next_.at(partition) < range.second) return false;
  return offsets_.pending() == 0 && format_->assembling() == 0;
}

void KafkaSource::flushProducer(int timeout_ms) {
  if (const int n = producer_.outstanding(); n > 0)
    spdlog::info("shutdown: waiting up to {} s for the broker to acknowledge {} message(s)",
                 timeout_ms / 1000, n);
  producer_.flush(timeout_ms);
  if (const int n = producer_.outstanding(); n > 0)
    spdlog::warn("shutdown: {} message(s) to the results or dead-letter topic not acknowledged", n);
}

void KafkaSource::logSuppressed() {
  for (RateLimitedLog* log : {&feedback_log_, &invalid_log_})
    if (const long n = log->pendingSuppressed())
      spdlog::warn("{} more {} log line(s) were suppressed (every one is counted in {})", n,
                   log == &invalid_log_ ? "invalid-message" : "invalid-feedback",
                   log == &invalid_log_ ? "assay_events_invalid_total"
                                        : "assay_feedback_events_total{outcome=\"invalid\"}");
}

}  // namespace assay
