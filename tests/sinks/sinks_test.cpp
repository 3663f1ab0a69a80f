#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/exposition.hpp"
#include "core/judgment.hpp"
#include "core/label_folder.hpp"
#include "sinks/jsonl_sink.hpp"
#include "sinks/registry.hpp"
#include "sinks/sink_stats.hpp"

using namespace assay;

namespace {
Judgment sample() {
  Judgment j{"req-1", "acme", "faq", "B", 1795959725120, {}};
  j.verdicts.push_back({"rouge_l", "answer_correctness", Verdict::ok(0.7272727), 0, 1, 0.012});
  j.verdicts.push_back({"citation", "citation", Verdict::check(false, "no [n]"), 0, 1, 0.001});
  j.verdicts.push_back(
      {"context_overlap", "faithfulness", Verdict::fail(Outcome::kNoContext), 0, 1, 0.002});
  return j;
}
}  // namespace

TEST_CASE("judgment JSON follows docs/events.md (judgment output)") {
  CHECK(formatRfc3339(1795959725120) == "2026-11-29T13:42:05.120Z");
  CHECK(formatRfc3339(0) == "1970-01-01T00:00:00.000Z");
  const std::string json = toJson(sample());
  CHECK(json.find('\n') == std::string::npos);
  rapidjson::Document d;
  d.Parse(json.c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(std::string(d["id"].GetString()) == "req-1");
  CHECK(std::string(d["variant"].GetString()) == "B");
  CHECK(std::string(d["judged_at"].GetString()) == "2026-11-29T13:42:05.120Z");
  const auto& v = d["verdicts"];
  REQUIRE(v.Size() == 3);
  CHECK(v[0]["score"].GetDouble() == doctest::Approx(0.727273));
  CHECK_FALSE(v[0].HasMember("passed"));
  CHECK_FALSE(v[0].HasMember("error"));
  CHECK(v[1]["passed"].GetBool() == false);
  CHECK(std::string(v[1]["evidence"].GetString()) == "no [n]");
  CHECK(v[2]["score"].IsNull());
  CHECK(std::string(v[2]["error"].GetString()) == "no_context");
  CHECK(v[2]["latency_ms"].GetDouble() == doctest::Approx(0.002));
}

TEST_CASE("label folding bounds cardinality") {
  LabelFolder f(2);
  CHECK(f.fold("a") == "a");
  CHECK(f.fold("b") == "b");
  CHECK(f.fold("c") == "other");
  CHECK(f.fold("a") == "a");
  CHECK(f.fold("") == "none");
  LabelFolder long_values(10);
  CHECK(long_values.fold(std::string(300, 'x')) == std::string(128, 'x'));
  std::string euros;
  for (int i = 0; i < 60; ++i) euros += "\u20ac";  // 3 bytes each: cut at 126, not inside one
  CHECK(long_values.fold(euros).size() == 126);
}

TEST_CASE("JSONL sink appends one line per judgment and releases the delivery token") {
  const std::string dir = "/tmp/assay_jsonl_" + std::to_string(::getpid());
  prometheus::Registry registry;
  SinkStats stats(registry);
  SinksOptions o;
  o.jsonl_enabled = true;
  o.jsonl.path = dir + "/sub/j.jsonl";  // parent folders are created
  auto sinks = createSinks(o, SinkContext{&stats, nullptr, ""});
  REQUIRE(sinks.size() == 1);
  CHECK(sinks[0]->name() == "jsonl");
  int finished = 0;
  for (int i = 0; i < 3; ++i) {
    DeliveryToken token(nullptr, [&](void*) { ++finished; });
    const auto j = sample();
    sinks[0]->write(j, toJson(j), token);
    token.reset();
  }
  CHECK(finished == 3);
  sinks[0]->flush();
  std::ifstream in(o.jsonl.path);
  int lines = 0;
  for (std::string l; std::getline(in, l);) {
    rapidjson::Document d;
    d.Parse(l.c_str());
    CHECK_FALSE(d.HasParseError());
    ++lines;
  }
  CHECK(lines == 3);
  CHECK(serializeMetrics(registry).find(
            "assay_sink_writes_total{result=\"ok\",sink=\"jsonl\"} 3") != std::string::npos);
  std::filesystem::remove_all(dir);

  SinksOptions bad;
  bad.jsonl_enabled = true;
  bad.jsonl.path = "/proc/no/such/dir/j.jsonl";
  CHECK_THROWS_AS(createSinks(bad, SinkContext{&stats, nullptr, ""}), std::runtime_error);
}

TEST_CASE("JSONL sink: reopen() after logrotate moved the file writes to a new one") {
  const std::string dir = "/tmp/assay_jsonl_reopen_" + std::to_string(::getpid());
  prometheus::Registry registry;
  SinkStats stats(registry);
  SinksOptions o;
  o.jsonl_enabled = true;
  o.jsonl.path = dir + "/j.jsonl";
  Sinks sinks(o, SinkContext{&stats, nullptr, ""});
  const auto lines = [](const std::string& path) {
    std::ifstream in(path);
    int n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  };
  const auto j = sample();
  sinks.deliver(j, nullptr);
  sinks.deliver(j, nullptr);
  std::filesystem::rename(o.jsonl.path, dir + "/j.jsonl.1");  // what logrotate does
  sinks.deliver(j, nullptr);                                  // still the moved file: it is open
  sinks.reopen();
  sinks.deliver(j, nullptr);
  sinks.flush();
  CHECK(lines(dir + "/j.jsonl.1") == 3);
  CHECK(lines(o.jsonl.path) == 1);
  CHECK((std::filesystem::status(o.jsonl.path).permissions() &
         std::filesystem::perms::others_read) == std::filesystem::perms::none);
  // A path that cannot be opened any more: the sink keeps its file and says why.
  std::filesystem::remove_all(dir);
  ::mkdir(dir.c_str(), 0500);  // not writable (except for root): the file is not created again
  sinks.reopen();
  sinks.deliver(j, nullptr);  // written to the (unlinked) open file, counted ok
  sinks.drain();              // by the sink's thread (sink_queue.hpp)
  CHECK(serializeMetrics(registry).find(
            "assay_sink_writes_total{result=\"ok\",sink=\"jsonl\"} 5") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("Sinks: every sink gets the judgment; the token goes once the last sink lets go") {
  const std::string dir = "/tmp/assay_sinkset_" + std::to_string(::getpid());
  prometheus::Registry registry;
  SinkStats stats(registry);
  SinksOptions o;
  o.jsonl_enabled = true;
  o.jsonl.path = dir + "/j.jsonl";
  Sinks sinks(o, SinkContext{&stats, nullptr, ""});
  CHECK_FALSE(sinks.empty());
  int finished = 0;
  sinks.deliver(sample(), DeliveryToken(nullptr, [&](void*) { ++finished; }));
  sinks.flush();  // the sink writes on its own thread (sink_queue.hpp)
  CHECK(finished == 1);
  CHECK(stats.judged.Value() == 1.0);
  std::ifstream in(o.jsonl.path);
  std::string line;
  REQUIRE(std::getline(in, line));
  CHECK(line == toJson(sample()));
  CHECK_FALSE(std::getline(in, line));
  // No sink configured: judgments reach the metrics only, and the token is released at once.
  Sinks none(SinksOptions{}, SinkContext{&stats, nullptr, ""});
  CHECK(none.empty());
  none.deliver(sample(), DeliveryToken(nullptr, [&](void*) { ++finished; }));
  CHECK(finished == 2);
  CHECK(stats.judged.Value() == 2.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("JSONL sink: a record is written whole or not at all; writing resumes after") {
  // A file size limit (as on a full disk) cuts a write short: the file must go back to its last
  // complete line, and the next record must not land on half of one.
  std::signal(SIGXFSZ, SIG_IGN);
  const std::string dir = "/tmp/assay_jsonl_full_" + std::to_string(::getpid());
  prometheus::Registry registry;
  SinkStats stats(registry);
  SinksOptions o;
  o.jsonl_enabled = true;
  o.jsonl.path = dir + "/j.jsonl";
  auto sinks = createSinks(o, SinkContext{&stats, nullptr, ""});
  const auto j = sample();
  const std::string json = toJson(j);
  for (int i = 0; i < 3; ++i) sinks[0]->write(j, json, nullptr);
  const auto whole = std::filesystem::file_size(o.jsonl.path);
  CHECK(whole == 3 * (json.size() + 1));
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit small = old;
  small.rlim_cur = whole + json.size() / 2;  // room for half a record
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  sinks[0]->write(j, json, nullptr);
  sinks[0]->write(j, json, nullptr);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  CHECK(std::filesystem::file_size(o.jsonl.path) == whole);  // rolled back both times
  sinks[0]->write(j, json, nullptr);                         // space is back
  sinks[0]->flush();
  std::ifstream in(o.jsonl.path);
  int lines = 0;
  for (std::string l; std::getline(in, l); ++lines) CHECK(l == json);
  CHECK(lines == 4);
  CHECK(stats.writes("jsonl", true).Value() == 4.0);
  CHECK(stats.writes("jsonl", false).Value() == 2.0);
  CHECK(
      (std::filesystem::status(o.jsonl.path).permissions() & std::filesystem::perms::others_read) ==
      std::filesystem::perms::none);  // 0640: not world-readable
  std::filesystem::remove_all(dir);
}

TEST_CASE("JSONL sink: a FIFO is refused at start-up and by the path check, never waited on") {
  const std::string dir = "/tmp/assay_jsonl_fifo_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/j.jsonl";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  prometheus::Registry registry;
  SinkStats stats(registry);
  JsonlSinkOptions o;
  o.path = fifo;
  // No reader: open(2) would block for good without O_NONBLOCK.
  CHECK_THROWS_WITH_AS(JsonlSink(o, stats), doctest::Contains("a FIFO without reader"),
                       std::runtime_error);
  CHECK(jsonlPathProblem(fifo) == "'" + fifo + "' is a FIFO or a socket, not a file");
  CHECK(jsonlPathProblem(dir + "/new.jsonl").empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("JSONL sink: a batch is one write; when it does not fit, as many records as fit") {
  std::signal(SIGXFSZ, SIG_IGN);
  const std::string dir = "/tmp/assay_jsonl_batch_" + std::to_string(::getpid());
  prometheus::Registry registry;
  SinkStats stats(registry);
  SinksOptions o;
  o.jsonl_enabled = true;
  o.jsonl.path = dir + "/j.jsonl";
  auto sinks = createSinks(o, SinkContext{&stats, nullptr, ""});
  const auto j = sample();
  const std::string json = toJson(j);
  int released = 0;
  const auto batch = [&](std::size_t n) {
    std::vector<Sink::Record> records;
    for (std::size_t i = 0; i < n; ++i)
      records.push_back({&j, &json, DeliveryToken(nullptr, [&](void*) { ++released; })});
    sinks[0]->writeBatch(records);
  };
  batch(4);
  CHECK(released == 4);  // handed to the kernel: every token let go
  const auto whole = std::filesystem::file_size(o.jsonl.path);
  CHECK(whole == 4 * (json.size() + 1));
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit small = old;
  small.rlim_cur = whole + 2 * (json.size() + 1) + json.size() / 2;  // 2.5 records more
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  batch(5);  // the batch does not fit: rolled back, then 2 whole records and 3 errors
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  CHECK(released == 9);
  CHECK(std::filesystem::file_size(o.jsonl.path) == whole + 2 * (json.size() + 1));
  batch(3);  // failing: one by one, and the first good write ends the failing state
  batch(2);  // one write again
  std::ifstream in(o.jsonl.path);
  int lines = 0;
  for (std::string l; std::getline(in, l); ++lines) CHECK(l == json);
  CHECK(lines == 4 + 2 + 3 + 2);
  CHECK(stats.writes("jsonl", true).Value() == 11.0);
  CHECK(stats.writes("jsonl", false).Value() == 3.0);
  std::filesystem::remove_all(dir);
}
