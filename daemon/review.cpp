#include "daemon/review.hpp"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "sinks/jsonl_sink.hpp"
#include "sinks/kafka_results_sink.hpp"

namespace assay {
namespace {

void writeEvent(rapidjson::Writer<rapidjson::StringBuffer>& w, const Event& e) {
  const auto str = [&](const char* key, const std::string& v) {
    w.Key(key);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("id", e.id);
  str("tenant", e.tenant);
  str("app", e.app);
  str("variant", e.variant);
  str("question", e.question);
  w.Key("contexts");
  w.StartArray();
  for (const auto& c : e.contexts) {
    w.StartObject();
    str("id", c.id);
    str("text", c.text);
    if (!c.source.empty()) str("source", c.source);
    w.EndObject();
  }
  w.EndArray();
  str("answer", e.answer);
  if (e.reference) str("reference", *e.reference);
  w.EndObject();
}

/// XXH3 of (judge, id) as a share of 2^64, in [0, 1).
double pick(const std::string& judge, const std::string& id) {
  std::string key = judge;
  key += '\x1f';
  key += id;
  return static_cast<double>(XXH3_64bits(key.data(), key.size())) /
         (static_cast<double>(std::numeric_limits<std::uint64_t>::max()) + 1.0);
}

}  // namespace

std::string reviewLine(const Event& event, const Judgment& judgment,
                       const std::string& reasons_json, std::int64_t now_ms) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("reviewed_at");
  const std::string at = formatRfc3339(now_ms);
  w.String(at.data(), static_cast<rapidjson::SizeType>(at.size()));
  w.Key("reasons");
  w.RawValue(reasons_json.data(), reasons_json.size(), rapidjson::kArrayType);
  w.Key("event");
  writeEvent(w, event);
  w.Key("judgment");
  const std::string j = toJson(judgment);
  w.RawValue(j.data(), j.size(), rapidjson::kObjectType);
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

ReviewRouter::ReviewRouter(const ReviewOptions& options, prometheus::Registry& registry,
                           rd_kafka_t* producer)
    : options_(options),
      routed_(prometheus::BuildCounter()
                  .Name("assay_review_routed_total")
                  .Help("Verdicts routed to the review file, by judge and reason")
                  .Register(registry)),
      skipped_(prometheus::BuildCounter()
                   .Name("assay_review_skipped_total")
                   .Help("Verdicts that would have been routed to review but were not: "
                         "hourly_cap, no_event")
                   .Register(registry)),
      written_(prometheus::BuildCounter()
                   .Name("assay_review_written_total")
                   .Help("Review lines the review file took (output=file) or the broker "
                         "acknowledged (output=topic)")
                   .Register(registry)),
      write_errors_(prometheus::BuildCounter()
                        .Name("assay_review_write_errors_total")
                        .Help("Review lines the review file did not take, or the review topic's "
                              "producer refused or the broker did not acknowledge")
                        .Register(registry)),
      file_ok_(written_.Add({{"output", "file"}})),
      file_errors_(write_errors_.Add({{"output", "file"}})),
      topic_ok_(written_.Add({{"output", "topic"}})),
      topic_errors_(write_errors_.Add({{"output", "topic"}})),
      producer_(producer) {
  for (const auto& j : options_.judges) {
    for (const char* reason : {"below_threshold", "random_share"})
      routed_.Add({{"judge", j.name}, {"reason", reason}});
    for (const char* reason : {"hourly_cap", "no_event"})
      skipped_.Add({{"judge", j.name}, {"reason", reason}});
  }
  if (!options_.topic.empty() && !producer_)
    throw std::runtime_error("review.topic: '" + options_.topic + "' needs a Kafka producer");
  if (!options_.path.empty()) {
    std::error_code ec;
    const auto folder = std::filesystem::path(options_.path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    // Without blocking: a FIFO with no reader would hang start-up in open(2) for good.
    std::string why;
    const int fd = openForAppend(options_.path, why);
    if (fd < 0)
      throw std::runtime_error("review.path: cannot open '" + options_.path +
                               "' for appending: " + why);
    file_ = ::fdopen(fd, "a");
    if (!file_) {
      ::close(fd);
      throw std::runtime_error("review.path: cannot open '" + options_.path +
                               "' for appending: " + std::strerror(errno));
    }
  }
  std::string to = options_.path;
  if (!options_.topic.empty())
    to += (to.empty() ? "topic '" : " and topic '") + options_.topic + "'";
  spdlog::info("review: {} judge(s) routed to {} (share {}, at most {} an hour each)",
               options_.judges.size(), to, options_.share, options_.max_per_hour);
}

void ReviewRouter::write(const std::string& id, const std::string& line) {
  if (file_) {
    if (std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
        std::fputc('\n', file_) != EOF && std::fflush(file_) == 0)
      file_ok_.Increment();
    else
      file_errors_.Increment();
  }
  if (options_.topic.empty()) return;
  void* opaque = KafkaResultsSink::deliveryOpaque(&topic_ok_, &topic_errors_, "review topic");
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      producer_, RD_KAFKA_V_TOPIC(options_.topic.c_str()), RD_KAFKA_V_KEY(id.data(), id.size()),
      RD_KAFKA_V_VALUE(const_cast<char*>(line.data()), line.size()),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
  if (err) {  // queue full, message too large, unknown topic: counted
    KafkaResultsSink::dropOpaque(opaque);
    static std::atomic<int> logged{0};
    if (logged++ < 10)
      spdlog::error("review.topic '{}': produce failed: {}", options_.topic, rd_kafka_err2str(err));
  }
}

ReviewRouter::~ReviewRouter() {
  if (file_) std::fclose(file_);
}

void ReviewRouter::remember(const Event& event) {
  std::lock_guard lock(mu_);
  if (events_.size() < kMaxKept) events_.insert_or_assign(event.id, event);
}

void ReviewRouter::forget(const std::string& id) {
  std::lock_guard lock(mu_);
  events_.erase(id);
}

void ReviewRouter::route(const Judgment& judgment, std::int64_t now_ms) {
  std::lock_guard lock(mu_);
  const auto it = events_.find(judgment.id);
  std::string reasons;
  const std::int64_t hour = now_ms / 3'600'000;
  for (const auto& v : judgment.verdicts) {
    const auto rule =
        std::find_if(options_.judges.begin(), options_.judges.end(),
                     [&](const ReviewOptions::Judge& j) { return j.name == v.judge; });
    if (rule == options_.judges.end() || !v.verdict.score) continue;
    const double score = *v.verdict.score;
    const char* reason = score < rule->below                           ? "below_threshold"
                         : pick(v.judge, judgment.id) < options_.share ? "random_share"
                                                                       : nullptr;
    if (!reason) continue;
    if (it == events_.end()) {
      skipped_.Add({{"judge", v.judge}, {"reason", "no_event"}}).Increment();
      continue;
    }
    auto& [at, n] = hour_[v.judge];
    if (at != hour) at = hour, n = 0;
    if (n >= options_.max_per_hour) {
      skipped_.Add({{"judge", v.judge}, {"reason", "hourly_cap"}}).Increment();
      continue;
    }
    ++n;
    routed_.Add({{"judge", v.judge}, {"reason", reason}}).Increment();
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    w.Key("judge");
    w.String(v.judge.data(), static_cast<rapidjson::SizeType>(v.judge.size()));
    if (v.version) {
      w.Key("judge_version");
      w.String(v.version->id.data(), static_cast<rapidjson::SizeType>(v.version->id.size()));
    }
    w.Key("reason");
    w.String(reason);
    w.Key("score");
    w.Double(score);
    w.Key("threshold");
    w.Double(rule->below);
    w.EndObject();
    reasons += (reasons.empty() ? "" : ",") + std::string(buf.GetString(), buf.GetSize());
  }
  if (!reasons.empty())
    write(judgment.id, reviewLine(it->second, judgment, "[" + reasons + "]", now_ms));
  if (it != events_.end()) events_.erase(it);
}

}  // namespace assay
