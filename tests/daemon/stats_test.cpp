// Every subsystem declares its series once, in its own stats struct (consumer, sampling,
// judges, sinks; the LLM and budget structs in tests/llm): together on one registry they make
// an exposition that promtool accepts.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <prometheus/registry.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/exposition.hpp"
#include "daemon/log_setup.hpp"
#include "judges/judge_stats.hpp"
#include "judges/registry.hpp"
#include "sampling/sampling_stats.hpp"
#include "sinks/sink_stats.hpp"
#include "sources/client_stats.hpp"
#include "sources/consumer_stats.hpp"

using namespace assay;

namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

}  // namespace

TEST_CASE("stats structs: names, labels, and promtool check metrics accepts the exposition") {
  prometheus::Registry registry;
  ConsumerStats consumer(registry, {"rag.events", "rag.feedback"}, "9.9.9");
  SamplingStats sampling(registry, 1);
  JudgeStats judges(registry);
  SinkStats sinks(registry);
  const auto* rouge = findJudgeFactory(JudgeKind::kLexical, "rouge_l");
  JudgeInfo info = rouge->info({});
  info.buckets = {0.5, 1.0};
  auto& j = judges.add("rouge_l", "3b49556b0793", info, rouge->descriptor->outcomes);
  consumer.consumed.Increment(3);
  consumer.invalid[static_cast<int>(InvalidReason::kNotUtf8)]->Increment();
  sampling.countSampled("acme");
  sampling.countSampled("globex");  // beyond max_label_values = 1 → other
  judges.countRun(j, Outcome::kOk);
  j.score->Observe(0.7);
  j.latency->Observe(0.0001);
  consumer.setLag({{"rag.events", 0, 7}, {"rag.events", 1, 0}});
  consumer.setTopic(1, 12.5, 3);
  consumer.replay_skipped.Increment(4);
  const std::string text = serializeMetrics(registry);
  CHECK(has(text, "assay_events_consumed_total{topic=\"rag.events\"} 3"));
  CHECK(has(text, "assay_events_invalid_total{reason=\"not_utf8\"} 1"));
  CHECK(has(text, "assay_events_invalid_total{reason=\"too_large\"} 0"));
  CHECK(has(text, "assay_events_sampled_total{tenant=\"acme\"} 1"));
  CHECK(has(text, "assay_events_sampled_total{tenant=\"other\"} 1"));
  CHECK(sampling.sampledTotal() == 2.0);
  CHECK(has(text,
            "assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "judge_version=\"3b49556b0793\",outcome=\"ok\"} 1"));
  CHECK(has(text,
            "assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "judge_version=\"3b49556b0793\",outcome=\"no_reference\"} 0"));
  CHECK(has(text,
            "assay_judge_score_bucket{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "judge_version=\"3b49556b0793\",le="
            "\"1\"} 1"));
  CHECK(has(text,
            "assay_judge_score_bucket{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "judge_version=\"3b49556b0793\",le="
            "\"0.5\"} 0"));
  CHECK(has(text, "assay_build_info{version=\"9.9.9\"} 1"));
  CHECK(has(text, "assay_consumer_lag_messages{partition=\"0\",topic=\"rag.events\"} 7"));
  CHECK(has(text, "assay_events_judged_total 0"));
  CHECK(has(text, "assay_consumer_last_message_age_seconds{topic=\"rag.feedback\"} 12.5"));
  CHECK(has(text, "assay_consumer_assigned_partitions{topic=\"rag.feedback\"} 3"));
  CHECK(has(text, "assay_consumer_assigned_partitions{topic=\"rag.events\"} 0"));
  CHECK(has(text, "assay_events_replay_skipped_total 4"));
  CHECK(has(text, "assay_kafka_authentication_failures_total 0"));
  // A local judge does not export an LLM judge's outcomes until one happens.
  CHECK_FALSE(has(text, "outcome=\"skipped_budget\""));
  judges.countRun(j, Outcome::kJudgeError);
  CHECK(has(serializeMetrics(registry),
            "assay_judge_runs_total{criterion=\"answer_correctness\",judge=\"rouge_l\","
            "judge_version=\"3b49556b0793\",outcome=\"judge_error\"} 1"));
  CHECK(has(text, "assay_queue_depth 0"));
  CHECK(has(text, "assay_samples_dropped_total{reason=\"queue_full\"} 0"));
  // A partition no longer assigned loses its series.
  consumer.setLag({{"rag.events", 1, 2}});
  CHECK_FALSE(has(serializeMetrics(registry), "partition=\"0\""));
  const auto [invalid, detail] = consumer.invalidSummary();
  CHECK(invalid == 1);
  CHECK(detail == "not_utf8=1");

  const std::string path = "/tmp/assay_metrics_" + std::to_string(::getpid()) + ".prom";
  std::ofstream(path) << text;
  const int rc =
      std::system(("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::ifstream out(path + ".out");
  const std::string report((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  INFO("promtool said: " << report);
  CHECK(rc == 0);
  std::remove(path.c_str());
  std::remove((path + ".out").c_str());
}

TEST_CASE("process series: from /proc/self, as the Prometheus client libraries name them") {
  prometheus::Registry registry;
  ProcessStats process(registry);
  const std::string text = serializeMetrics(registry);
  const auto value = [&](const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + name.size() + 2));
  };
  CHECK(value("process_resident_memory_bytes") > 1e6);  // a test binary is MBs resident
  CHECK(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
  rlimit rl{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &rl) == 0);
  CHECK(value("process_max_fds") == static_cast<double>(rl.rlim_cur));
  const double fds = value("process_open_fds");
  CHECK(fds >= 3);  // stdin, stdout, stderr at least
  const int extra = ::open("/dev/null", O_RDONLY);
  REQUIRE(extra >= 0);
  process.refresh();
  ::close(extra);
  const std::string after = serializeMetrics(registry);
  CHECK(after.find("\nprocess_open_fds " + std::to_string(static_cast<int>(fds) + 1) + "\n") !=
        std::string::npos);
  const double start = value("process_start_time_seconds");
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(start <= now);
  CHECK(start > now - 600);
  CHECK(value("process_cpu_seconds_total") >= 0);
}

TEST_CASE("librdkafka statistics: broker state and round trip, fetch and producer queues") {
  prometheus::Registry registry;
  KafkaClientStats stats(registry);
  // The shape of librdkafka's STATISTICS.md, trimmed to what is read (values made up).
  const std::string consumer = R"({"name": "assayd#consumer-2", "type": "consumer",
    "brokers": {
      "GroupCoordinator": {"source": "logical", "nodeid": 1, "state": "UP", "rtt": {"avg": 1}},
      ":0/internal": {"source": "internal", "nodeid": -1, "state": "UP"},
      "127.0.0.1:9092/bootstrap": {"source": "configured", "nodeid": -1, "state": "UP"},
      "127.0.0.1:9092/1": {"source": "learned", "nodeid": 1, "state": "UP",
                           "rtt": {"avg": 2500, "p99": 9000}},
      "127.0.0.1:9093/2": {"source": "learned", "nodeid": 2, "state": "DOWN",
                           "rtt": {"avg": 0}}},
    "topics": {"rag.events": {"partitions": {
      "0": {"fetchq_cnt": 120}, "1": {"fetchq_cnt": 30}, "-1": {"fetchq_cnt": 0}}}}})";
  CHECK(stats.update(consumer, "consumer"));
  CHECK(stats.update(R"({"type": "producer", "msg_cnt": 7, "brokers": {}})", "producer"));
  CHECK_FALSE(stats.update("{not json", "consumer"));
  const std::string text = serializeMetrics(registry);
  CHECK(has(text, "assay_kafka_broker_up{broker=\"127.0.0.1:9092/1\",client=\"consumer\"} 1"));
  CHECK(has(text, "assay_kafka_broker_up{broker=\"127.0.0.1:9093/2\",client=\"consumer\"} 0"));
  CHECK(has(text,
            "assay_kafka_broker_rtt_seconds{broker=\"127.0.0.1:9092/1\",client=\"consumer\"} "
            "0.0025"));
  CHECK_FALSE(has(text, "GroupCoordinator"));  // not a broker of the cluster
  CHECK_FALSE(has(text, "internal"));
  CHECK_FALSE(has(text, "bootstrap"));
  CHECK(has(text, "assay_kafka_fetch_queue_messages{topic=\"rag.events\"} 150"));
  CHECK(has(text, "assay_kafka_producer_queue_messages 7"));
  // All brokers down (librdkafka's error callback): every broker_up reads 0 at once, not at the
  // next statistics document.
  stats.allBrokersDown();
  const std::string down = serializeMetrics(registry);
  CHECK(has(down, "assay_kafka_broker_up{broker=\"127.0.0.1:9092/1\",client=\"consumer\"} 0"));
  CHECK(has(down, "assay_kafka_broker_up{broker=\"127.0.0.1:9093/2\",client=\"consumer\"} 0"));
}

TEST_CASE("log formats: JSON lines with escaping; journald priority prefixes") {
  const spdlog::details::log_msg msg(spdlog::source_loc{}, "assayd", spdlog::level::warn,
                                     "a \"quoted\"\nline\t\u00e9");
  spdlog::memory_buf_t json;
  logFormatter("json", false)->format(msg, json);
  const std::string line(json.data(), json.size());
  CHECK(line.back() == '\n');
  // Quotes and control characters escaped; UTF-8 (é) kept as it is.
  CHECK(line.find("\"level\":\"warning\",\"msg\":\"a \\\"quoted\\\"\\nline\\t\u00e9\"}") !=
        std::string::npos);
  CHECK(line.rfind(R"({"ts":")", 0) == 0);
  CHECK(line.find("Z\",\"level\"") == 30);  // {"ts":"YYYY-MM-DDTHH:MM:SS.mmmZ"
  spdlog::memory_buf_t journal;
  logFormatter("text", true)->format(msg, journal);
  CHECK(std::string(journal.data(), journal.size()) == "<4>warning a \"quoted\"\nline\t\u00e9\n");
  spdlog::memory_buf_t error;
  const spdlog::details::log_msg err(spdlog::source_loc{}, "assayd", spdlog::level::err, "x");
  logFormatter("text", true)->format(err, error);
  CHECK(std::string(error.data(), error.size()) == "<3>error x\n");
  ::unsetenv("JOURNAL_STREAM");
  CHECK_FALSE(stderrIsJournal());
  struct stat st {};
  REQUIRE(::fstat(STDERR_FILENO, &st) == 0);
  ::setenv("JOURNAL_STREAM", (std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)).c_str(),
           1);
  CHECK(stderrIsJournal());
  ::setenv("JOURNAL_STREAM", "1:2", 1);
  CHECK_FALSE(stderrIsJournal());
  ::unsetenv("JOURNAL_STREAM");
}
