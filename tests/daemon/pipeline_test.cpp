// The pipeline's poll loop one turn at a time, without worker threads: a real Kafka protocol
// endpoint (the embedded broker, librdkafka's mock cluster), 30 dev events and 2 invalid
// messages produced into it, pollOnce() until everything is consumed, the queue judged on this
// thread, the offsets finished, the JSON Lines file and the metrics read back.
#include "daemon/pipeline.hpp"

#include <doctest/doctest.h>
#include <librdkafka/rdkafka.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "config/loader.hpp"
#include "core/exposition.hpp"
#include "core/judgment.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {

/// The value of one sample line "NAME{LABELS} VALUE" of the exposition, or -1.
double sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("assay_pipeline_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

/// (key, value) of the first `want` messages of `topic`'s partitions 0..partitions-1, read
/// from the beginning by a consumer of its own (no group); waits at most 30 s.
std::vector<std::pair<std::string, std::string>> readTopic(const std::string& bootstrap,
                                                           const std::string& topic, int partitions,
                                                           std::size_t want) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err) ==
          RD_KAFKA_CONF_OK);
  REQUIRE(rd_kafka_conf_set(conf, "group.id", "pipeline-test-reader", err, sizeof err) ==
          RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int i = 0; i < partitions; ++i)
    rd_kafka_topic_partition_list_add(list, topic.c_str(), i)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<std::pair<std::string, std::string>> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (!m->err)
      out.emplace_back(std::string(static_cast<const char*>(m->key), m->key_len),
                       std::string(static_cast<const char*>(m->payload), m->len));
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

}  // namespace

TEST_CASE("pollOnce: consume, screen, parse, sample and queue; judge; finish every offset") {
  TempDir dir;
  const auto events = (dir.path / "events.jsonl").string();
  const auto jsonl = (dir.path / "judgments.jsonl").string();
  {
    std::ifstream dev(std::string(test::kSharedDataDir) + "/rag_events_dev.jsonl");
    std::ofstream out(events);
    std::string line;
    for (int i = 0; i < 30 && std::getline(dev, line); ++i) out << line << "\n";
    out << "this is not JSON\n";  // unkeyed: parsed, invalid
    out << R"({"question": "where is it?"})"
        << "\n";  // unkeyed, no answer: missing_field
  }
  const auto loaded = loadConfigString(R"(
kafka: {brokers: embedded, topic: t, group_id: g, partitions: 2}
sampling: {rate: 0.5}
judges:
  - {name: nonempty, kind: check, check: answer_nonempty}
  - {name: overlap, kind: lexical, metric: context_overlap}
admin: {listen: "127.0.0.1:0"}
sinks: {jsonl: {path: ")" + jsonl + R"("}}
review: {topic: review, judges: {overlap: {below: 0.2}}, share: 1}
)",
                                       "pipeline_test.yaml");
  REQUIRE(loaded.ok());
  RunOptions run;
  run.replay_file = events;
  run.no_workers = true;
  Pipeline p(loaded.config, run);
  p.replay();

  // The first assignment of a consumer group takes about 3 s on the mock coordinator.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(p.pollOnce(100));
    text = serializeMetrics(p.registry());
    if (sample(text, "assay_events_consumed_total{topic=\"t\"}") == 32) break;
  }
  REQUIRE(sample(text, "assay_events_consumed_total{topic=\"t\"}") == 32);
  CHECK(p.assigned());
  CHECK(sample(text, "assay_events_invalid_total{reason=\"not_json\"}") == 1);
  CHECK(sample(text, "assay_events_invalid_total{reason=\"missing_field\"}") == 1);
  // Sampling at 0.5: exactly the ids whose hash is below half of 2^64 are queued.
  std::size_t expected = 0;
  {
    std::ifstream in(events);
    std::string line;
    for (int i = 0; i < 30 && std::getline(in, line); ++i) {
      const auto at = line.find("\"id\": \"");
      REQUIRE(at != std::string::npos);
      const auto from = at + 7;
      const std::string id = line.substr(from, line.find('"', from) - from);
      expected += sampleHash(id) < (1ULL << 63) ? 1 : 0;
    }
  }
  CHECK(p.queued() == expected);
  CHECK(p.offsets().pending() == expected);  // the queued ones; the rest are finished
  // Judging on this thread finishes them.
  CHECK(p.judgeQueued() == expected);
  CHECK(p.offsets().pending() == 0);
  REQUIRE(p.pollOnce(0));
  text = serializeMetrics(p.registry());
  CHECK(sample(text, "assay_events_judged_total") == static_cast<double>(expected));
  // Every per-judge series carries the judge's version.
  REQUIRE(loaded.config.judges[0].version);
  const std::string version = loaded.config.judges[0].version->id;
  CHECK(sample(text,
               "assay_judge_runs_total{criterion=\"non_empty\",judge=\"nonempty\","
               "judge_version=\"" +
                   version + "\",outcome=\"ok\"}") == static_cast<double>(expected));
  CHECK(sample(text, "assay_queue_depth") == 0);
  // Every message of both partitions is finished: the committable positions cover them all.
  CHECK(p.offsets().committable(0) + p.offsets().committable(1) == 32);
  p.shutdown();
  std::ifstream in(jsonl);
  std::size_t lines = 0;
  std::set<std::string> scored;  // by overlap: the events review routes
  for (std::string l; std::getline(in, l);) {
    ++lines;
    // …and every verdict written names it, with the digests of the fields it comes from.
    JudgmentRecord r;
    REQUIRE_FALSE(readJudgmentLine(l, r));
    REQUIRE(r.verdicts.size() == 2);
    CHECK(r.verdicts[0].version == version);
    CHECK(r.verdicts[1].version == loaded.config.judges[1].version->id);
    CHECK(r.verdicts[0].version_fields.size() == loaded.config.judges[0].version->digests.size());
    if (r.verdicts[1].score) scored.insert(*r.id);
  }
  CHECK(scored.size() > expected / 2);
  CHECK(lines == expected);

  // review.topic: share 1 routes every judged event, one message each, keyed by its id, on
  // the topic the embedded broker created; the broker acknowledged each.
  text = serializeMetrics(p.registry());
  CHECK(sample(text, "assay_review_written_total{output=\"topic\"}") ==
        static_cast<double>(scored.size()));
  CHECK(sample(text, "assay_review_write_errors_total{output=\"topic\"}") == 0);
  const auto review = readTopic(p.bootstrapServers(), "review", 2, scored.size());
  REQUIRE(review.size() == scored.size());
  std::set<std::string> keys;
  for (const auto& [key, value] : review) {
    keys.insert(key);
    rapidjson::Document d;
    REQUIRE_FALSE(d.Parse(value.c_str()).HasParseError());
    CHECK(std::string(d["event"]["id"].GetString()) == key);
    CHECK(std::string(d["judgment"]["id"].GetString()) == key);
    REQUIRE(d["reasons"].Size() == 1);
    const std::string reason = d["reasons"][0]["reason"].GetString();
    CHECK((reason == "random_share") == (d["reasons"][0]["score"].GetDouble() >= 0.2));
  }
  CHECK(keys == scored);
}
