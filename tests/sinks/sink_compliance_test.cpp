// The sink table's compliance test (sinks/registry.hpp): every row is built as the pipeline
// builds it (behind its own queue), enabled by a configuration that names it, and must take
// the shared hostile judgments (invalid UTF-8, control characters, a 1 MiB evidence, NaN and
// infinite numbers, no verdict) without throwing, count every write, let every delivery token
// go exactly once by flush(), survive a reopen, and name itself as its row does. The results
// topic row writes to librdkafka's mock cluster (a real Kafka protocol endpoint over TCP).
// A new sink passes this before it lands (docs/adding-a-sink.md).
#include <doctest/doctest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/exposition.hpp"
#include "sinks/registry.hpp"

using namespace assay;

namespace {

std::vector<Judgment> hostileJudgments() {
  std::vector<Judgment> out;
  Judgment plain{"req-1", "acme", "faq", "B", 1795959725120, {}, false};
  plain.verdicts.push_back({"rouge_l", "answer_correctness", Verdict::ok(0.5), 0, 1, 0.01});
  out.push_back(plain);
  Judgment bytes{"\xFF\xFE id", "\x01\x02 tenant", "app\n\r\t", "\xC3", 0, {}, true};
  bytes.verdicts.push_back({"j\x7F", "c\"\\", Verdict::check(false, "\xF0\x9F \x00 x"), 0, 1,
                            std::numeric_limits<double>::quiet_NaN()});
  out.push_back(bytes);
  Judgment numbers{"req-3", "", "", "", -1, {}, false};
  numbers.verdicts.push_back(
      {"n", "faithfulness", Verdict::ok(std::numeric_limits<double>::infinity()),
       -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::max(), -0.0});
  numbers.verdicts.push_back({"f", "faithfulness", Verdict::fail(Outcome::kJudgeError), 0, 1, 0});
  out.push_back(numbers);
  Judgment big{std::string(10'000, 'x'), "t", "a", "v", 1, {}, false};
  big.verdicts.push_back({"big", "c", Verdict::check(true, std::string(1 << 20, 'e')), 0, 1, 1});
  out.push_back(big);
  out.push_back(Judgment{});  // no id, no verdict
  return out;
}

/// A producer on its own mock cluster, wired as the pipeline wires the results sink's.
struct MockProducer {
  rd_kafka_t* owner = nullptr;
  rd_kafka_mock_cluster_t* cluster = nullptr;
  rd_kafka_t* producer = nullptr;
  MockProducer() {
    char err[512];
    owner = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), err, sizeof err);
    REQUIRE(owner);
    cluster = rd_kafka_mock_cluster_new(owner, 1);
    REQUIRE(cluster);
    REQUIRE(rd_kafka_mock_topic_create(cluster, "results", 1, 1) == RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(cluster),
                              err, sizeof err) == RD_KAFKA_CONF_OK);
    REQUIRE(rd_kafka_conf_set(conf, "message.max.bytes", "10000000", err, sizeof err) ==
            RD_KAFKA_CONF_OK);
    rd_kafka_conf_set_dr_msg_cb(conf, &KafkaResultsSink::deliveryReport);
    producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE(producer);
  }
  ~MockProducer() {
    rd_kafka_flush(producer, 10000);
    rd_kafka_destroy(producer);
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(owner);
  }
};

}  // namespace

TEST_CASE("sink table: every row takes the hostile judgments and lets every token go once") {
  const std::string dir = "/tmp/assay_sink_compliance_" + std::to_string(::getpid());
  MockProducer kafka;
  std::set<std::string> names;
  const auto judgments = hostileJudgments();
  for (const auto& row : sinkTable()) {
    CAPTURE(row.name);
    CHECK(names.insert(row.name).second);
    prometheus::Registry registry;
    SinkStats stats(registry);
    SinksOptions o;
    o.jsonl_enabled = true;
    o.jsonl.path = dir + "/" + row.name + ".jsonl";
    const SinkContext ctx{&stats, kafka.producer, "results"};
    REQUIRE(row.enabled(o, ctx));
    CHECK_FALSE(row.enabled(SinksOptions{}, SinkContext{&stats, nullptr, ""}));
    std::vector<std::unique_ptr<Sink>> one;
    one.push_back(row.create(o, ctx));
    REQUIRE(one.back());
    CHECK(one.back()->name() == row.name);
    Sinks sinks(std::move(one), o, stats);
    std::atomic<int> released{0};
    int delivered = 0;
    for (int round = 0; round < 2; ++round) {
      for (const auto& j : judgments) {
        CHECK_NOTHROW(sinks.deliver(j, DeliveryToken(nullptr, [&](void*) { ++released; })));
        ++delivered;
      }
      CHECK_NOTHROW(sinks.reopen());  // SIGHUP between the rounds
    }
    // A sink may hold its tokens until its data is safe (the broker's acknowledgement, served
    // by the producer's poll); flush() waits for that.
    for (int i = 0; i < 100 && released.load() < delivered; ++i) {
      rd_kafka_poll(kafka.producer, 100);
      sinks.flush();
    }
    CHECK(released.load() == delivered);
    const std::string text = serializeMetrics(registry);
    const std::string ok = "assay_sink_writes_total{result=\"ok\",sink=\"" + std::string(row.name) +
                           "\"} " + std::to_string(delivered);
    CHECK_MESSAGE(text.find(ok) != std::string::npos, text);
    CHECK(text.find("assay_sink_dropped_total{sink=\"" + std::string(row.name) + "\"} 0") !=
          std::string::npos);
    CHECK_NOTHROW(sinks.flush());  // twice is fine
  }
  CHECK(names.size() == sinkTable().size());
  std::filesystem::remove_all(dir);
}
