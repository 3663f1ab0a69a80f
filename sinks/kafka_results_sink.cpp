#include "sinks/kafka_results_sink.hpp"

#include <spdlog/spdlog.h>

#include <atomic>

namespace assay {
namespace {

// Carried in the message opaque until the delivery report.
struct Pending {
  DeliveryToken token;  ///< null for dead-letter copies
  prometheus::Counter* ok;
  prometheus::Counter* errors;
  const char* what;  ///< for the log: "results topic" or "dead-letter topic"
};

}  // namespace

KafkaResultsSink::KafkaResultsSink(rd_kafka_t* producer, std::string topic, SinkStats& stats)
    : producer_(producer), topic_(std::move(topic)) {
  // Resolve both children now: the delivery report must not look families up.
  ok_ = &stats.writes("kafka", true);
  errors_ = &stats.writes("kafka", false);
}

void KafkaResultsSink::write(const Judgment& j, const std::string& json, DeliveryToken token) {
  auto* pending = new Pending{std::move(token), ok_, errors_, "results topic"};
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      producer_, RD_KAFKA_V_TOPIC(topic_.c_str()), RD_KAFKA_V_KEY(j.id.data(), j.id.size()),
      RD_KAFKA_V_VALUE(const_cast<char*>(json.data()), json.size()),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(pending), RD_KAFKA_V_END);
  if (err) {
    // Queue full or unknown topic: counted; the event still finishes (the file sink has it).
    errors_->Increment();
    static std::atomic<int> logged{0};
    if (logged++ < 10)
      spdlog::error("results topic '{}': produce failed: {}", topic_, rd_kafka_err2str(err));
    delete pending;
  }
}

void KafkaResultsSink::flush() { rd_kafka_flush(producer_, 10000); }

void* KafkaResultsSink::deliveryOpaque(prometheus::Counter* ok, prometheus::Counter* errors,
                                       const char* what) {
  return new Pending{nullptr, ok, errors, what};
}

void KafkaResultsSink::dropOpaque(void* opaque) {
  auto* pending = static_cast<Pending*>(opaque);
  if (!pending) return;
  pending->errors->Increment();
  delete pending;
}

void KafkaResultsSink::deliveryReport(rd_kafka_t*, const rd_kafka_message_t* msg, void*) {
  auto* pending = static_cast<Pending*>(msg->_private);
  if (!pending) return;
  if (msg->err) {
    pending->errors->Increment();
    static std::atomic<int> logged{0};
    if (logged++ < 10)
      spdlog::error("{}: delivery failed: {}", pending->what, rd_kafka_err2str(msg->err));
  } else {
    pending->ok->Increment();
  }
  delete pending;  // releases the token: the event may now be marked finished
}

}  // namespace assay
