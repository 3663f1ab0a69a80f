#include "sources/kafka.hpp"

#include <librdkafka/rdkafka_mock.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "config/loader.hpp"
#include "core/rate_limited_log.hpp"
#include "core/service_notify.hpp"
#include "sinks/kafka_results_sink.hpp"
#include "sources/event_parser.hpp"

namespace assay {
namespace {

void set(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw ConfigurationError("kafka.properties." + key + ": " +
                             kafkaPropertyMessage(key, value, err));
  }
}

// An unreachable broker makes librdkafka log each failed connection (FAIL, ERROR) and call the
// error callback (_TRANSPORT) for every attempt: about 25 lines a minute. The state is in
// assay_kafka_brokers_reachable and /readyz; the log keeps 5 lines a minute of each.
RateLimitedLog g_librdkafka_log, g_kafka_error_log;

void logCb(const rd_kafka_t*, int level, const char* fac, const char* buf) {
  // kafka.properties go to both clients; librdkafka warns about the half that does not apply.
  const std::string_view msg(buf);
  if (std::string_view(fac) == "CONFWARN" &&
      (msg.find("will be ignored by this producer") != std::string_view::npos ||
       msg.find("will be ignored by this consumer") != std::string_view::npos)) {
    spdlog::debug("librdkafka {}: {}", fac, buf);
    return;
  }
  if (level > 4) return spdlog::debug("librdkafka {}: {}", fac, buf);
  long suppressed = 0;
  if (!g_librdkafka_log.allow(suppressed)) return;
  if (level <= 3)
    spdlog::error("librdkafka {}: {}{}", fac, buf, RateLimitedLog::note(suppressed));
  else
    spdlog::warn("librdkafka {}: {}{}", fac, buf, RateLimitedLog::note(suppressed));
}

// Defaults first, then the user's properties verbatim (so they win).
rd_kafka_conf_t* baseConf(const std::string& bootstrap) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (!bootstrap.empty()) set(conf, "bootstrap.servers", bootstrap);
  set(conf, "client.id", "assayd");
  set(conf, "statistics.interval.ms", "15000");  // sources/client_stats.hpp
  rd_kafka_conf_set_log_cb(conf, logCb);
  return conf;
}

void destroyError(rd_kafka_error_t* e) {
  if (!e) return;
  spdlog::warn("kafka: {}", rd_kafka_error_string(e));
  rd_kafka_error_destroy(e);
}

void applyUserProperties(rd_kafka_conf_t* conf, const KafkaOptions& o) {
  for (const auto& [k, v] : o.properties) set(conf, k, v);
}

rd_kafka_t* newHandle(rd_kafka_type_t type, rd_kafka_conf_t* conf) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("kafka: cannot create client: ") + err);
  }
  return rk;
}

}  // namespace

rd_kafka_conf_t* producerConf(const KafkaOptions& o, const std::string& bootstrap) {
  rd_kafka_conf_t* conf = baseConf(bootstrap);
  set(conf, "enable.idempotence", "true");
  set(conf, "linger.ms", "20");
  // Judgments waiting for an unreachable results topic are bounded: 64 MB (librdkafka's 1 GB
  // default is more than a monitor should hold); beyond it a judgment is counted as a failed
  // write, as one whose delivery times out (message.timeout.ms, 300 s) is.
  set(conf, "queue.buffering.max.kbytes", "65536");
  applyUserProperties(conf, o);
  return conf;
}

rd_kafka_conf_t* consumerConf(const KafkaOptions& o, const std::string& bootstrap) {
  rd_kafka_conf_t* conf = baseConf(bootstrap);
  set(conf, "group.id", o.group_id);
  set(conf, "enable.auto.offset.store", "false");
  set(conf, "auto.offset.reset", "earliest");
  applyUserProperties(conf, o);
  // These carry the delivery guarantee; a user property must not silently undo them. assayd
  // commits itself, every auto.commit.interval.ms, with the commit metadata that lists the
  // finished offsets above each position (librdkafka's auto-commit would commit without it).
  set(conf, "enable.auto.offset.store", "false");
  set(conf, "enable.auto.commit", "false");
  return conf;
}

std::string checkKafkaClients(const KafkaOptions& o) {
  // No bootstrap servers (unless the properties name some): nothing connects anywhere.
  for (const auto type : {RD_KAFKA_CONSUMER, RD_KAFKA_PRODUCER}) {
    rd_kafka_conf_t* conf = nullptr;
    try {
      conf = type == RD_KAFKA_CONSUMER ? consumerConf(o, "") : producerConf(o, "");
    } catch (const std::exception& e) {
      return e.what();
    }
    rd_kafka_conf_set_log_cb(conf, nullptr);  // the caller reports the one error
    char err[512];
    rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk) {
      rd_kafka_conf_destroy(conf);
      return err;
    }
    rd_kafka_destroy(rk);
  }
  return "";
}

// ---- EmbeddedBroker ----------------------------------------------------------------------------

EmbeddedBroker::EmbeddedBroker(int partitions, const std::vector<std::string>& topics) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(conf, logCb);
  owner_ = newHandle(RD_KAFKA_PRODUCER, conf);
  // The mock cluster's thread inherits this thread's signal mask: with every signal blocked,
  // a SIGHUP or SIGTERM for the daemon never lands on it (one that did interrupted its poll
  // and ended the thread: the broker was gone for good).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  rd_kafka_mock_cluster_t* mc = cluster_ = rd_kafka_mock_cluster_new(owner_, 1);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!mc) {
    rd_kafka_destroy(owner_);
    throw std::runtime_error("kafka.brokers: embedded: cannot start librdkafka's mock cluster");
  }
  bootstrap_ = rd_kafka_mock_cluster_bootstraps(mc);
  for (const auto& t : topics) {
    if (t.empty()) continue;
    if (rd_kafka_mock_topic_create(mc, t.c_str(), partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_mock_cluster_destroy(mc);
      rd_kafka_destroy(owner_);
      throw std::runtime_error("kafka: embedded: cannot create topic '" + t + "'");
    }
  }
}

EmbeddedBroker::~EmbeddedBroker() {
  if (cluster_) rd_kafka_mock_cluster_destroy(cluster_);  // before its owner handle
  if (owner_) rd_kafka_destroy(owner_);
}

// ---- KafkaProducer -----------------------------------------------------------------------------

KafkaProducer::KafkaProducer(const KafkaOptions& o, const std::string& bootstrap,
                             KafkaClientStats* stats) {
  rd_kafka_conf_t* conf = producerConf(o, bootstrap);
  rd_kafka_conf_set_dr_msg_cb(conf, KafkaResultsSink::deliveryReport);
  if (stats) {
    rd_kafka_conf_set_opaque(conf, stats);
    rd_kafka_conf_set_stats_cb(conf, KafkaClientStats::statsCallback);
  }
  rk_ = newHandle(RD_KAFKA_PRODUCER, conf);
}

KafkaProducer::~KafkaProducer() {
  if (!rk_) return;
  rd_kafka_flush(rk_, 10000);
  rd_kafka_destroy(rk_);
}

std::size_t KafkaProducer::replay(const std::string& path, const std::string& topic,
                                  const LineEncoder& encode, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigurationError(flag + ": cannot read '" + path + "'");
  std::string line;
  std::size_t n = 0, line_no = 0, rejected = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::string key, value, error;
    if (!encode(line, key, value, error)) {
      spdlog::warn("{}: {}:{}: {}; skipped", flag, path, line_no, error);
      ++rejected;
      continue;
    }
    for (;;) {
      const auto err =
          rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(topic.c_str()),
                            RD_KAFKA_V_KEY(key.empty() ? nullptr : key.data(), key.size()),
                            RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk_, 100);
        continue;
      }
      if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
        // Larger than the producer's message.max.bytes: the broker would refuse it too.
        spdlog::warn("{}: {}:{}: {} bytes is larger than message.max.bytes; skipped", flag, path,
                     line_no, value.size());
        ++rejected;
        break;
      }
      if (err)
        throw std::runtime_error(flag + ": produce to '" + topic +
                                 "' failed: " + rd_kafka_err2str(err));
      ++n;
      break;
    }
    rd_kafka_poll(rk_, 0);
  }
  if (in.bad()) throw std::runtime_error(flag + ": error reading '" + path + "'");
  if (rejected) spdlog::warn("{}: {} line(s) were skipped", flag, rejected);
  if (rd_kafka_flush(rk_, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error(flag + ": the broker did not acknowledge every message within 60 s");
  return n;
}

bool KafkaProducer::produceDeadLetter(const std::string& topic, const void* payload,
                                      std::size_t len, const void* key, std::size_t key_len,
                                      std::string_view reason, const Source& source,
                                      prometheus::Counter& ok, prometheus::Counter& errors) {
  const bool cut = len > kMaxDeadLetterBytes;
  rd_kafka_headers_t* headers = rd_kafka_headers_new(5);
  rd_kafka_header_add(headers, "assay-invalid-reason", -1, reason.data(),
                      static_cast<ssize_t>(reason.size()));
  rd_kafka_header_add(headers, "assay-source-topic", -1, source.topic.data(),
                      static_cast<ssize_t>(source.topic.size()));
  rd_kafka_header_add(headers, "assay-source-partition", -1,
                      std::to_string(source.partition).c_str(), -1);
  rd_kafka_header_add(headers, "assay-source-offset", -1, std::to_string(source.offset).c_str(),
                      -1);
  if (cut)
    rd_kafka_header_add(headers, "assay-original-bytes", -1, std::to_string(len).c_str(), -1);
  void* opaque = KafkaResultsSink::deliveryOpaque(&ok, &errors);
  const auto err = rd_kafka_producev(
      rk_, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key, key_len),
      RD_KAFKA_V_VALUE(const_cast<void*>(payload), cut ? kMaxDeadLetterBytes : len),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers),
      RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return true;  // librdkafka owns the headers now
  rd_kafka_headers_destroy(headers);
  KafkaResultsSink::dropOpaque(opaque);
  static std::atomic<int> logged{0};
  if (logged++ < 10)
    spdlog::error("dead-letter topic '{}': produce failed: {}", topic, rd_kafka_err2str(err));
  return false;
}

// ---- KafkaConsumer -----------------------------------------------------------------------------

// librdkafka stops fetching once its pre-fetch queue holds queued.max.messages.kbytes (or
// queued.min.messages) and, in 2.0 (Debian 12 ships 2.0.2), looks at the queue again only when
// something wakes its broker thread, at the latest after a second (confluentinc/librdkafka#2879;
// 2.1 added fetch.queue.backoff.ms for it). A consumer slower than its fetcher (judging every
// event, or catching up on a backlog) drained the queue, then sat idle for the rest of that
// second: at rate 1.0 on the bench, 39-47k events/s against 64-68k with the queue unbounded.
// Each time half of either bound was consumed, this thread asks the leaders of the assigned
// partitions for their end offsets (ListOffsets, one small request per leader): the answer
// wakes each leader's broker thread, which sees the room and fetches again while the other
// half is consumed. It never wakes more often than half the queue is consumed (a quarter
// measured the same events/s and more requests), and never blocks the poll thread.
class KafkaConsumer::FetchNudge {
 public:
  explicit FetchNudge(rd_kafka_t* rk) : rk_(rk) {
    const rd_kafka_conf_t* conf = rd_kafka_conf(rk);
    auto get = [conf](const char* name, std::uint64_t fallback) -> std::uint64_t {
      char buf[32];
      std::size_t size = sizeof buf;
      if (rd_kafka_conf_get(conf, name, buf, &size) != RD_KAFKA_CONF_OK) return fallback;
      const auto v = std::strtoull(buf, nullptr, 10);
      return v > 0 ? v : fallback;
    };
    step_bytes_ = std::max<std::uint64_t>(get("queued.max.messages.kbytes", 65536) * 1024 / 2, 1);
    const auto step_messages = std::max<std::uint64_t>(get("queued.min.messages", 100000) / 2, 1);
    // Each message counts at least this many bytes: step_bytes_ of them is reached after half
    // the queue's bytes or half its messages, whichever comes first.
    min_weight_ = std::max<std::uint64_t>(step_bytes_ / step_messages, 1);
    thread_ = std::thread([this] { run(); });
  }
  ~FetchNudge() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  FetchNudge(const FetchNudge&) = delete;
  FetchNudge& operator=(const FetchNudge&) = delete;

  /// The poll thread's budget between two wake-ups (KafkaConsumer::poll): step() in all, each
  /// message counting max(its bytes, minWeight()).
  std::uint64_t step() const { return step_bytes_; }
  std::uint64_t minWeight() const { return min_weight_; }
  /// Poll thread, once the budget is spent: the thread sends the requests.
  void signal() {
    {
      std::lock_guard lock(mu_);
      pending_ = true;
    }
    wake_.notify_one();
  }
  std::uint64_t nudges() const { return nudges_.load(std::memory_order_relaxed); }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || pending_; });
      if (stop_) return;
      pending_ = false;
      lock.unlock();
      rd_kafka_topic_partition_list_t* parts = nullptr;
      if (rd_kafka_assignment(rk_, &parts) == RD_KAFKA_RESP_ERR_NO_ERROR && parts) {
        if (parts->cnt > 0) {
          for (int i = 0; i < parts->cnt; ++i) parts->elems[i].offset = RD_KAFKA_OFFSET_END;
          rd_kafka_offsets_for_times(rk_, parts, 1000);  // the answer (or error) is the wake-up
          nudges_.fetch_add(1, std::memory_order_relaxed);
        }
        rd_kafka_topic_partition_list_destroy(parts);
      }
      lock.lock();
    }
  }

  rd_kafka_t* rk_;
  std::uint64_t step_bytes_ = 0, min_weight_ = 1;
  std::atomic<std::uint64_t> nudges_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool pending_ = false, stop_ = false;
  std::thread thread_;
};

KafkaConsumer::KafkaConsumer(const KafkaOptions& o, const std::string& bootstrap,
                             OffsetTracker& tracker, OffsetTracker* feedback,
                             KafkaClientStats* stats, bool subscribe)
    : stats_(stats),
      topic_(o.topic),
      feedback_topic_(feedback ? o.feedback_topic : ""),
      tracker_(tracker),
      feedback_tracker_(feedback_topic_.empty() ? nullptr : feedback) {
  rd_kafka_conf_t* conf = consumerConf(o, bootstrap);
  rd_kafka_conf_set_rebalance_cb(conf, rebalanceCb);
  rd_kafka_conf_set_error_cb(conf, errorCb);
  rd_kafka_conf_set_offset_commit_cb(conf, commitCb);
  rd_kafka_conf_set_stats_cb(conf, statsCb);
  rd_kafka_conf_set_opaque(conf, this);
  for (const auto& [k, v] : o.properties) {  // checked by the loader and by librdkafka
    if (k == "auto.commit.interval.ms") commit_interval_ = std::chrono::milliseconds(std::stoll(v));
    if (k == "partition.assignment.strategy")
      cooperative_sticky_ = v.find("cooperative-sticky") != std::string::npos;
  }
  if (!subscribe) {
    // assay backfill: a read at an offset (the timestamp search) answers at once rather than
    // after the broker's fetch wait (500 ms by default).
    set(conf, "fetch.wait.max.ms", "10");
  }
  rk_ = newHandle(RD_KAFKA_CONSUMER, conf);
  rd_kafka_poll_set_consumer(rk_);
  commit_q_ = rd_kafka_queue_new(rk_);
  try {
    nudge_ = std::make_unique<FetchNudge>(rk_);
    nudge_left_ = nudge_step_ = nudge_->step();
    nudge_weight_ = nudge_->minWeight();
  } catch (...) {  // no thread to be had: the handle is not left behind
    rd_kafka_queue_destroy(commit_q_);
    rd_kafka_destroy(rk_);
    throw;
  }
  subscribed_ = subscribe;
  if (!subscribe) return;  // assay backfill: assignRanges() later
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(2);
  rd_kafka_topic_partition_list_add(topics, topic_.c_str(), RD_KAFKA_PARTITION_UA);
  if (feedback_tracker_)
    rd_kafka_topic_partition_list_add(topics, feedback_topic_.c_str(), RD_KAFKA_PARTITION_UA);
  const auto err = rd_kafka_subscribe(rk_, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  if (err) {
    nudge_.reset();
    rd_kafka_queue_destroy(commit_q_);
    rd_kafka_destroy(rk_);  // the destructor does not run for a constructor that throws
    throw std::runtime_error("kafka.topic: cannot subscribe to '" + topic_ +
                             "': " + rd_kafka_err2str(err));
  }
}

OffsetTracker* KafkaConsumer::trackerOf(const char* topic) const {
  if (feedback_tracker_ && feedback_topic_ == topic) return feedback_tracker_;
  return &tracker_;
}

bool KafkaConsumer::isFeedback(const rd_kafka_message_t* m) const {
  return feedback_tracker_ && m->rkt && feedback_topic_ == rd_kafka_topic_name(m->rkt);
}

std::vector<KafkaConsumer::Lag> KafkaConsumer::lag() const {
  std::vector<Lag> out;
  rd_kafka_topic_partition_list_t* parts = nullptr;
  if (rd_kafka_assignment(rk_, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR || !parts) return out;
  if (rd_kafka_position(rk_, parts) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < parts->cnt; ++i) {
      const auto& p = parts->elems[i];
      std::int64_t low = -1, high = -1;
      if (rd_kafka_get_watermark_offsets(rk_, p.topic, p.partition, &low, &high) !=
              RD_KAFKA_RESP_ERR_NO_ERROR ||
          high < 0)
        continue;
      // Nothing consumed yet: from the committed offset; without one, auto.offset.reset's
      // start (assay's default "earliest": the low watermark).
      std::int64_t position = p.offset;
      if (position < 0) {
        const auto c = committed_.find({p.topic, p.partition});
        position = c != committed_.end() ? c->second : low;
      }
      if (position < 0) continue;
      out.push_back({p.topic, p.partition, std::max<std::int64_t>(0, high - position)});
    }
  }
  rd_kafka_topic_partition_list_destroy(parts);
  return out;
}

std::vector<std::int32_t> KafkaConsumer::partitionsOf(int timeout_ms) const {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk_, topic_.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  const auto merr = rd_kafka_metadata(rk_, 0, rkt, &md, timeout_ms);
  rd_kafka_topic_destroy(rkt);
  if (merr)
    throw std::runtime_error("kafka: no metadata for '" + topic_ + "': " + rd_kafka_err2str(merr));
  std::vector<std::int32_t> partitions;
  for (int t = 0; t < md->topic_cnt; ++t)
    if (topic_ == md->topics[t].topic && !md->topics[t].err)
      for (int p = 0; p < md->topics[t].partition_cnt; ++p)
        partitions.push_back(md->topics[t].partitions[p].id);
  rd_kafka_metadata_destroy(md);
  if (partitions.empty())
    throw std::runtime_error("kafka: topic '" + topic_ + "' has no partition (does it exist?)");
  return partitions;
}

std::map<std::int32_t, std::int64_t> KafkaConsumer::offsetsForTime(
    const std::vector<std::int32_t>& partitions, std::int64_t ms, int timeout_ms) const {
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size()));
  for (auto p : partitions) rd_kafka_topic_partition_list_add(list, topic_.c_str(), p)->offset = ms;
  const auto err = rd_kafka_offsets_for_times(rk_, list, timeout_ms);
  std::map<std::int32_t, std::int64_t> out;
  for (int i = 0; i < list->cnt && !err; ++i)
    out[list->elems[i].partition] = list->elems[i].err ? -1 : list->elems[i].offset;
  rd_kafka_topic_partition_list_destroy(list);
  if (err)
    throw std::runtime_error("kafka: offsets for times of '" + topic_ +
                             "': " + rd_kafka_err2str(err));
  return out;
}

std::int64_t KafkaConsumer::timestampAt(std::int32_t partition, std::int64_t offset,
                                        int timeout_ms) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic_.c_str(), partition)->offset = offset;
  rd_kafka_assign(rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
  std::int64_t ts = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (ts < 0 && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 100);
    if (!m) continue;
    if (!m->err && m->partition == partition) ts = rd_kafka_message_timestamp(m, nullptr);
    rd_kafka_message_destroy(m);
  }
  rd_kafka_assign(rk_, nullptr);
  if (ts < 0)
    throw std::runtime_error("kafka: no message at offset " + std::to_string(offset) +
                             " of partition " + std::to_string(partition) + " within " +
                             std::to_string(timeout_ms) + " ms");
  return ts;
}

std::vector<KafkaConsumer::Range> KafkaConsumer::offsetsBetween(std::int64_t from_ms,
                                                                std::int64_t to_ms,
                                                                int timeout_ms) {
  const auto partitions = partitionsOf(timeout_ms);
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> marks;  // low, high
  for (auto p : partitions) {
    std::int64_t low = 0, high = 0;
    if (const auto err =
            rd_kafka_query_watermark_offsets(rk_, topic_.c_str(), p, &low, &high, timeout_ms))
      throw std::runtime_error("kafka: watermarks of '" + topic_ + "': " + rd_kafka_err2str(err));
    marks[p] = {low, high};
  }
  // The lookup for time 0 must answer each non-empty partition's first offset; a broker that
  // answers "none" instead does not look offsets up by timestamp (librdkafka's mock cluster):
  // then a binary search over the messages' own timestamps finds the same offsets.
  const auto probe = offsetsForTime(partitions, 0, timeout_ms);
  bool by_lookup = true;
  for (auto p : partitions)
    if (marks[p].second > marks[p].first && probe.at(p) < 0) by_lookup = false;
  if (!by_lookup)
    spdlog::info(
        "kafka: the broker does not look offsets up by timestamp; searching the "
        "messages' timestamps instead");
  const auto first_at = [&](std::int32_t p, std::int64_t ms,
                            const std::map<std::int32_t, std::int64_t>& looked) {
    const auto [low, high] = marks[p];
    if (by_lookup) return looked.at(p) < 0 ? high : looked.at(p);
    std::int64_t lo = low, hi = high;  // the first offset whose timestamp is >= ms
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (timestampAt(p, mid, timeout_ms) >= ms)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  const auto from = by_lookup ? offsetsForTime(partitions, from_ms, timeout_ms) : probe;
  const auto to = by_lookup ? offsetsForTime(partitions, to_ms, timeout_ms) : probe;
  std::vector<Range> ranges;
  for (auto p : partitions) {
    const auto f = first_at(p, from_ms, from);
    ranges.push_back(Range{p, f, std::max(f, first_at(p, to_ms, to))});
  }
  return ranges;
}

void KafkaConsumer::assignRanges(const std::vector<Range>& ranges) {
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(ranges.size()));
  for (const auto& r : ranges)
    if (r.to > r.from)
      rd_kafka_topic_partition_list_add(list, topic_.c_str(), r.partition)->offset = r.from;
  const auto err = rd_kafka_assign(rk_, list);
  assigned_count_ = static_cast<std::size_t>(list->cnt);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) throw std::runtime_error(std::string("kafka: assign: ") + rd_kafka_err2str(err));
  assigned_ = true;
  in_assignment_ = true;
}

void KafkaConsumer::commitFinished() {
  if (!subscribed_) return;  // assay backfill commits nothing
  servePeriodicCommits(0);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_periodic_commit_ < commit_interval_) return;
  last_periodic_commit_ = now;
  rd_kafka_topic_partition_list_t* list = commitList(true);
  if (list->cnt > 0) {
    // Its result comes on commit_q_ (servePeriodicCommits), apart from the messages and the
    // rebalances: close() can wait for it alone.
    const auto err = rd_kafka_commit_queue(rk_, list, commit_q_, nullptr, nullptr);
    if (!err) ++commits_in_flight_;
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
      spdlog::warn("kafka: offset commit failed: {}", rd_kafka_err2str(err));
  }
  rd_kafka_topic_partition_list_destroy(list);
}

void KafkaConsumer::servePeriodicCommits(int timeout_ms) {
  while (rd_kafka_event_t* ev = rd_kafka_queue_poll(commit_q_, timeout_ms)) {
    if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_OFFSET_COMMIT) {
      if (commits_in_flight_ > 0) --commits_in_flight_;
      commitCb(
          rk_, rd_kafka_event_error(ev),
          const_cast<rd_kafka_topic_partition_list_t*>(rd_kafka_event_topic_partition_list(ev)),
          this);
    }
    rd_kafka_event_destroy(ev);
    timeout_ms = 0;  // one wait at most
  }
}

void KafkaConsumer::noteAcknowledged(rd_kafka_resp_err_t err,
                                     const rd_kafka_topic_partition_list_t* offsets) {
  for (int i = 0; !err && offsets && i < offsets->cnt; ++i) {
    const auto& e = offsets->elems[i];
    if (e.err || e.offset < 0) continue;
    acked_[{e.topic, e.partition}] = {e.offset, std::string(static_cast<const char*>(e.metadata),
                                                            e.metadata ? e.metadata_size : 0)};
  }
}

void KafkaConsumer::commitCb(rd_kafka_t*, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t* offsets, void* opaque) {
  auto* self = static_cast<KafkaConsumer*>(opaque);
  self->noteAcknowledged(err, offsets);
  for (int i = 0; offsets && i < offsets->cnt && !err; ++i) err = offsets->elems[i].err;
  if (!err || err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;  // a failed one is sent again
  long suppressed = 0;
  if (self->commit_log_.allow(suppressed))
    spdlog::warn("kafka: offset commit failed: {}{}", rd_kafka_err2str(err),
                 RateLimitedLog::note(suppressed));
}

std::size_t KafkaConsumer::assignedPartitions(const std::string& topic) const {
  rd_kafka_topic_partition_list_t* parts = nullptr;
  if (rd_kafka_assignment(rk_, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR || !parts) return 0;
  std::size_t n = 0;
  for (int i = 0; i < parts->cnt; ++i) n += topic == parts->elems[i].topic;
  rd_kafka_topic_partition_list_destroy(parts);
  return n;
}

std::vector<std::int32_t> KafkaConsumer::assignedOf(const std::string& topic) const {
  std::vector<std::int32_t> out;
  rd_kafka_topic_partition_list_t* parts = nullptr;
  if (rd_kafka_assignment(rk_, &parts) != RD_KAFKA_RESP_ERR_NO_ERROR || !parts) return out;
  for (int i = 0; i < parts->cnt; ++i)
    if (topic == parts->elems[i].topic) out.push_back(parts->elems[i].partition);
  rd_kafka_topic_partition_list_destroy(parts);
  std::sort(out.begin(), out.end());
  return out;
}

int KafkaConsumer::partitionCount(const std::string& topic, int timeout_ms) const {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk_, topic.c_str(), nullptr);
  if (!rkt) return -1;
  const rd_kafka_metadata_t* md = nullptr;
  const auto err = rd_kafka_metadata(rk_, 0, rkt, &md, timeout_ms);
  int n = -1;
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR && md && md->topic_cnt == 1 && !md->topics[0].err)
    n = md->topics[0].partition_cnt;
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(rkt);
  return n;
}

KafkaConsumer::~KafkaConsumer() {
  nudge_.reset();
  close();
  rd_kafka_queue_destroy(commit_q_);  // before the handle (or kept with it, below)
  // librdkafka before 2.3.0 (Debian 12 ships 2.0.2) aborts in rd_kafka_destroy() when a
  // cooperative-sticky consumer is destroyed after joining its group but before its first
  // assignment (an assert on the assignor's state: confluentinc/librdkafka#4312, fixed by
  // #4381): a stop during a slow rebalance would end in SIGABRT. Such a consumer has left its
  // group (close) and owns no offset; its handle is silenced and kept to the process's exit.
  if (!assigned_ && cooperative_sticky_ && rd_kafka_version() < 0x02030000) {
    rd_kafka_set_log_level(rk_, 0);
    static rd_kafka_t* kept[8];  // plain array: still reachable when LeakSanitizer looks
    static std::size_t n_kept = 0;
    if (n_kept < std::size(kept)) {
      kept[n_kept++] = rk_;
      spdlog::info(
          "kafka: the consumer had no assignment yet: its handle is left to the process's exit "
          "(librdkafka {} would abort destroying it: confluentinc/librdkafka#4312)",
          rd_kafka_version_str());
      return;
    }
  }
  // A consumer that could not leave its group (no broker answers) would try again inside
  // rd_kafka_destroy(), without a bound (a stop with Kafka down hung there for 10 minutes,
  // until systemd's SIGKILL): close() already waited its time, so destroy skips it. librdkafka
  // still waits for its requests in flight (up to socket.timeout.ms): main() bounds the stop.
  if (subscribed_ && !rd_kafka_consumer_closed(rk_))
    rd_kafka_destroy_flags(rk_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  else
    rd_kafka_destroy(rk_);
}

void KafkaConsumer::nudgeFetchers() {
  nudge_left_ = nudge_step_;
  nudge_->signal();
}

std::uint64_t KafkaConsumer::fetchNudges() const { return nudge_ ? nudge_->nudges() : 0; }

void KafkaConsumer::storeFinishedOffsets() {
  const auto advanced = tracker_.takeAdvanced();
  const auto feedback = feedback_tracker_ ? feedback_tracker_->takeAdvanced()
                                          : std::vector<std::pair<std::int32_t, std::int64_t>>{};
  if (advanced.empty() && feedback.empty()) return;
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(advanced.size() + feedback.size()));
  for (const auto& [partition, position] : advanced)
    rd_kafka_topic_partition_list_add(list, topic_.c_str(), partition)->offset = position;
  for (const auto& [partition, position] : feedback)
    rd_kafka_topic_partition_list_add(list, feedback_topic_.c_str(), partition)->offset = position;
  const auto err = rd_kafka_offsets_store(rk_, list);
  if (err && err != RD_KAFKA_RESP_ERR__STATE)
    spdlog::warn("kafka: storing offsets failed: {}", rd_kafka_err2str(err));
  rd_kafka_topic_partition_list_destroy(list);
}

rd_kafka_topic_partition_list_t* KafkaConsumer::commitList(bool only_changed) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(8);
  const auto add = [this, list, only_changed](const std::string& topic,
                                              const OffsetTracker* tracker) {
    if (!tracker) return;
    for (auto& c : tracker->commits()) {
      const auto acked = acked_.find({topic, c.partition});
      if (only_changed && acked != acked_.end() && acked->second.first == c.position &&
          acked->second.second == c.metadata)
        continue;  // the broker has it already
      auto* e = rd_kafka_topic_partition_list_add(list, topic.c_str(), c.partition);
      e->offset = c.position;
      spdlog::debug("kafka: commit '{}' partition {} at {} with metadata '{}'", topic, c.partition,
                    c.position, c.metadata);
      if (!c.metadata.empty()) {  // owned by the list: freed with it (rd_free = free)
        e->metadata = std::malloc(c.metadata.size());
        std::memcpy(e->metadata, c.metadata.data(), c.metadata.size());
        e->metadata_size = c.metadata.size();
      }
    }
  };
  add(topic_, &tracker_);
  add(feedback_topic_, feedback_tracker_);
  return list;
}

void KafkaConsumer::serveUntil(rd_kafka_queue_t* q, std::chrono::milliseconds timeout,
                               const char* what, const std::function<bool()>& done,
                               const std::function<void(rd_kafka_event_t*)>& on_event) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_log = start + std::chrono::seconds(5);
  while (!done() && Clock::now() < start + timeout) {
    service::watchdog();
    if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 200)) {
      on_event(ev);
      rd_kafka_event_destroy(ev);
    }
    if (Clock::now() >= next_log && !done()) {
      next_log += std::chrono::seconds(5);
      spdlog::warn(
          "shutdown: still waiting for {} ({:.0f} s of at most {} s; a second SIGTERM or "
          "SIGINT ends assayd at once)",
          what, std::chrono::duration<double>(Clock::now() - start).count(),
          timeout.count() / 1000);
    }
  }
}

bool KafkaConsumer::close(std::chrono::milliseconds timeout) {
  if (closed_) return close_result_;
  closed_ = true;
  if (!subscribed_) {  // assay backfill: no group, nothing to commit
    rd_kafka_assign(rk_, nullptr);
    close_result_ = true;
    return true;
  }
  // A periodic commit the broker took but whose result was not served yet would look
  // unacknowledged and be sent again below, where a rebalance (every instance stopped at once:
  // the others' leaving) makes the coordinator refuse it: its result is waited for first, up
  // to 1 s, on its own queue (no message is taken and no rebalance served meanwhile).
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       commits_in_flight_ > 0 && std::chrono::steady_clock::now() < until;)
    servePeriodicCommits(10);
  storeFinishedOffsets();
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk_);
  rd_kafka_topic_partition_list_t* list = commitList(true);
  auto err = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (list->cnt > 0) {
    err = rd_kafka_commit_queue(rk_, list, q, nullptr, nullptr);
    bool answered = err != RD_KAFKA_RESP_ERR_NO_ERROR;
    serveUntil(
        q, timeout, "the final offset commit (the group coordinator does not answer)",
        [&] { return answered; },
        [&](rd_kafka_event_t* ev) {
          if (rd_kafka_event_type(ev) != RD_KAFKA_EVENT_OFFSET_COMMIT) return;
          answered = true;
          err = rd_kafka_event_error(ev);
          const auto* parts = rd_kafka_event_topic_partition_list(ev);
          noteAcknowledged(err, parts);
          for (int i = 0; parts && i < parts->cnt && !err; ++i) err = parts->elems[i].err;
        });
    if (!answered) err = RD_KAFKA_RESP_ERR__TIMED_OUT;
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
      spdlog::error(
          "kafka: final offset commit failed: {}; the events consumed since the last commit "
          "will be consumed again (exit code 3)",
          rd_kafka_err2str(err));
  }
  rd_kafka_topic_partition_list_destroy(list);
  // Leave the group. The revoke it serves commits nothing more (closing_), and librdkafka's own
  // final auto-commit finds nothing newer than what was just committed.
  closing_ = true;
  // The coordinator did not answer the commit: it will not answer the leave either; a short
  // wait, so that the whole stop stays well within systemd's TimeoutStopSec.
  const auto leave_timeout = err == RD_KAFKA_RESP_ERR__TIMED_OUT
                                 ? std::min(timeout, std::chrono::milliseconds(2000))
                                 : timeout;
  if (rd_kafka_error_t* e = rd_kafka_consumer_close_queue(rk_, q)) {
    spdlog::warn("kafka: leaving the consumer group: {}", rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
  } else {
    serveUntil(
        q, leave_timeout, "leaving the consumer group",
        [this] { return rd_kafka_consumer_closed(rk_); },
        [this](rd_kafka_event_t* ev) {
          if (rd_kafka_event_type(ev) != RD_KAFKA_EVENT_REBALANCE) return;
          onRebalance(rd_kafka_event_error(ev), const_cast<rd_kafka_topic_partition_list_t*>(
                                                    rd_kafka_event_topic_partition_list(ev)));
        });
    if (!rd_kafka_consumer_closed(rk_))
      spdlog::warn(
          "kafka: did not leave the consumer group within {} s; the group rebalances after "
          "session.timeout.ms",
          leave_timeout.count() / 1000);
  }
  rd_kafka_queue_destroy(q);
  close_result_ = !err || err == RD_KAFKA_RESP_ERR__NO_OFFSET;
  return close_result_;
}

void KafkaConsumer::readCommitted(const rd_kafka_topic_partition_list_t* parts) {
  if (parts->cnt == 0) return;  // a cooperative round that assigns nothing
  rd_kafka_topic_partition_list_t* c = rd_kafka_topic_partition_list_copy(parts);
  if (const auto err = rd_kafka_committed(rk_, c, 10000)) {
    spdlog::warn(
        "kafka: reading the committed offsets failed: {}; lag counts from the oldest message "
        "until one is consumed, and finished events after the commit point may be judged again",
        rd_kafka_err2str(err));
  } else {
    for (int i = 0; i < c->cnt; ++i) {
      const auto& e = c->elems[i];
      spdlog::debug("kafka: '{}' partition {} committed at {} ({} bytes of metadata)", e.topic,
                    e.partition, e.offset, e.metadata ? e.metadata_size : 0);
      if (e.err || e.offset < 0) continue;
      committed_[{e.topic, e.partition}] = e.offset;
      const std::string_view metadata(static_cast<const char*>(e.metadata),
                                      e.metadata ? e.metadata_size : 0);
      if (const auto n = trackerOf(e.topic)->restore(e.partition, e.offset, metadata); n > 0)
        spdlog::info(
            "kafka: '{}' partition {}: {} event(s) after the committed offset {} were finished "
            "before (commit metadata); they are skipped, not judged again",
            e.topic, e.partition, n, e.offset);
    }
  }
  rd_kafka_topic_partition_list_destroy(c);
}

void KafkaConsumer::rebalanceCb(rd_kafka_t*, rd_kafka_resp_err_t err,
                                rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  static_cast<KafkaConsumer*>(opaque)->onRebalance(err, partitions);
}

void KafkaConsumer::errorCb(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* self = static_cast<KafkaConsumer*>(opaque);
  if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
    self->all_brokers_down_ = true;
    return;  // the pipeline says so once, and again when a broker answers
  }
  if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION ||
      err == RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED) {
    ++self->auth_failures_;
    spdlog::error("kafka: authentication failed: {} (check kafka.properties sasl.* / ssl.*)",
                  reason);
    return;
  }
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    char why[512];
    rd_kafka_fatal_error(self->rk_, why, sizeof why);
    spdlog::critical("kafka: fatal error: {}", why);
    return;
  }
  // A failed connection or name lookup: librdkafka's log callback has said it (FAIL, ERROR),
  // and assay_kafka_brokers_reachable and /readyz carry the state; one line, not two.
  if (err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__RESOLVE) return;
  long suppressed = 0;
  if (g_kafka_error_log.allow(suppressed))
    spdlog::warn("kafka: {}: {}{}", rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)),
                 reason, RateLimitedLog::note(suppressed));
}

int KafkaConsumer::statsCb(rd_kafka_t* rk, char* json, std::size_t len, void* opaque) {
  auto* self = static_cast<KafkaConsumer*>(opaque);
  return KafkaClientStats::statsCallback(rk, json, len, self->stats_);
}

bool KafkaConsumer::brokerAnswers(int timeout_ms) const {
  const rd_kafka_metadata_t* md = nullptr;
  const auto err = rd_kafka_metadata(rk_, 0, nullptr, &md, timeout_ms);
  if (md) rd_kafka_metadata_destroy(md);
  return err == RD_KAFKA_RESP_ERR_NO_ERROR;
}

void KafkaConsumer::onRebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts) {
  ++rebalances_;
  const bool cooperative = std::string_view(rd_kafka_rebalance_protocol(rk_)) == "COOPERATIVE";
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    std::map<std::string, int> per_topic;
    for (int i = 0; i < parts->cnt; ++i) ++per_topic[parts->elems[i].topic];
    std::string what;
    for (const auto& [t, n] : per_topic)
      what += fmt::format("{}{} of '{}'", what.empty() ? "" : ", ", n, t);
    spdlog::info("kafka: assigned {} partition(s): {} ({} rebalance)", parts->cnt,
                 what.empty() ? "none" : what, cooperative ? "cooperative" : "eager");
    if (cooperative)
      destroyError(rd_kafka_incremental_assign(rk_, parts));
    else
      rd_kafka_assign(rk_, parts);
    assigned_count_ = cooperative ? assigned_count_ + static_cast<std::size_t>(parts->cnt)
                                  : static_cast<std::size_t>(parts->cnt);
    assigned_ = true;
    in_assignment_ = true;
    if (first_assigned_at_ == std::chrono::steady_clock::time_point{} && parts->cnt > 0)
      first_assigned_at_ = std::chrono::steady_clock::now();
    readCommitted(parts);
    return;
  }
  // Revoke (or error): store and commit what is finished before the partitions go, so the
  // next owner starts right after the last finished event.
  spdlog::info("kafka: {} partition(s) revoked", parts->cnt);
  storeFinishedOffsets();
  if (!closing_) {  // close() committed already, with its own deadline
    rd_kafka_topic_partition_list_t* list = commitList(true);
    const auto cerr = list->cnt > 0 ? rd_kafka_commit(rk_, list, 0) : RD_KAFKA_RESP_ERR_NO_ERROR;
    noteAcknowledged(cerr, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (cerr && cerr != RD_KAFKA_RESP_ERR__NO_OFFSET)
      spdlog::warn("kafka: commit on revoke failed: {}", rd_kafka_err2str(cerr));
  }
  std::map<OffsetTracker*, std::vector<std::int32_t>> ids;
  for (int i = 0; i < parts->cnt; ++i) {
    ids[trackerOf(parts->elems[i].topic)].push_back(parts->elems[i].partition);
    committed_.erase({parts->elems[i].topic, parts->elems[i].partition});
    acked_.erase({parts->elems[i].topic, parts->elems[i].partition});
  }
  for (auto& [t, partitions] : ids) {
    t->forget(partitions);
    if (t == &tracker_ && on_revoke_) on_revoke_(partitions);
  }
  if (cooperative) {
    destroyError(rd_kafka_incremental_unassign(rk_, parts));
    assigned_count_ -= std::min<std::size_t>(assigned_count_, static_cast<std::size_t>(parts->cnt));
  } else {
    rd_kafka_assign(rk_, nullptr);
    assigned_count_ = 0;
  }
  if (assigned_count_ == 0) in_assignment_ = false;  // until the next round's assignment
}

}  // namespace assay
