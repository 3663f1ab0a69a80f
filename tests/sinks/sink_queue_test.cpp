// The sink contract (sinks/sink.hpp, sinks/sink_queue.hpp): a write never blocks the caller.
// A stalled sink (held in its first write until the test has seen enough) delays neither
// the caller of deliver() (the judge workers, the budget ledger's thread that stores verdicts
// and settles money) nor any other sink; its queue's when_full policy bounds what it holds.
#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/exposition.hpp"
#include "sinks/registry.hpp"
#include "tests/wait.hpp"

using namespace assay;

namespace {

/// Counts writes and lets each token go at once.
class CountingSink final : public Sink {
 public:
  explicit CountingSink(std::atomic<int>& writes) : writes_(writes) {}
  std::string_view name() const override { return "counting"; }
  void write(const Judgment&, const std::string& json, DeliveryToken) override {
    if (!json.empty()) ++writes_;
  }
  void flush() override {}

 private:
  std::atomic<int>& writes_;
};

/// Its first write stalls until the test releases it (test::kSoon at most).
class StalledSink final : public Sink {
 public:
  std::string_view name() const override { return "stalled"; }
  void write(const Judgment&, const std::string&, DeliveryToken) override {
    std::unique_lock lock(mu_);
    if (!stalled_once_) {
      stalled_once_ = true;
      inside_ = true;
      cv_.wait_for(lock, test::kSoon, [&] { return released_; });
      inside_ = false;
    }
    ++writes_;
  }
  void flush() override {}
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  bool inside() {
    std::lock_guard lock(mu_);
    return inside_;
  }
  int writes() {
    std::lock_guard lock(mu_);
    return writes_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stalled_once_ = false, inside_ = false, released_ = false;
  int writes_ = 0;
};

Judgment judgment(int i) {
  Judgment j;
  j.id = "req-" + std::to_string(i);
  j.variant = "A";
  return j;
}

struct Fixture {
  prometheus::Registry registry;
  SinkStats stats{registry};
  std::atomic<int> counted{0}, finished{0};
  StalledSink* stalled = nullptr;

  std::unique_ptr<Sinks> make(std::size_t capacity, SinksOptions::WhenFull when_full) {
    SinksOptions o;
    o.queue_capacity = capacity;
    o.when_full = when_full;
    auto s = std::make_unique<StalledSink>();
    stalled = s.get();
    std::vector<std::unique_ptr<Sink>> sinks;
    sinks.push_back(std::move(s));
    sinks.push_back(std::make_unique<CountingSink>(counted));
    return std::make_unique<Sinks>(std::move(sinks), o, stats);
  }
  void deliver(Sinks& sinks, int i) {
    sinks.deliver(judgment(i), DeliveryToken(nullptr, [this](void*) { ++finished; }));
  }
  double metric(const std::string& series) {
    const std::string text = serializeMetrics(registry);
    const auto at = text.find("\n" + series + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
  }
};

}  // namespace

TEST_CASE("a stalled sink delays neither the caller nor the other sink; nothing is lost") {
  Fixture f;
  auto sinks = f.make(1000, SinksOptions::WhenFull::kBlock);
  f.deliver(*sinks, 0);
  REQUIRE(
      test::waitUntil("the stalled sink entered its write", [&] { return f.stalled->inside(); }));
  // The caller hands on 200 judgments while the stalled sink sits in its first write: every
  // deliver() returns (the caller never waits for a sink) and the other sink writes them all.
  for (int i = 1; i <= 200; ++i) f.deliver(*sinks, i);
  REQUIRE(test::waitUntil("the other sink wrote them", [&] { return f.counted.load() == 201; }));
  CHECK(f.stalled->inside());  // still stalled: the other sink did not wait for it
  CHECK(f.stalled->writes() == 0);
  CHECK(f.finished.load() == 0);  // every offset waits for the stalled sink's copy
  CHECK(f.stats.judged.Value() == 201);
  CHECK_FALSE(sinks->saturated());  // 200 queued, under the capacity of 1000
  // 200 queued and the one its thread is stuck writing
  CHECK(f.metric("assay_sink_queue_depth{sink=\"stalled\"}") == 201);
  CHECK(f.metric("assay_sink_queue_depth{sink=\"counting\"}") == 0);
  f.stalled->release();
  sinks->flush();
  CHECK(f.stalled->writes() == 201);  // block loses nothing
  CHECK(f.finished.load() == 201);
  CHECK(f.metric("assay_sink_dropped_total{sink=\"stalled\"}") == 0);
}

TEST_CASE(
    "when_full: block queues past the capacity and says it is saturated until it catches up") {
  Fixture f;
  auto sinks = f.make(10, SinksOptions::WhenFull::kBlock);
  f.deliver(*sinks, 0);
  REQUIRE(
      test::waitUntil("the stalled sink entered its write", [&] { return f.stalled->inside(); }));
  for (int i = 1; i <= 30; ++i) f.deliver(*sinks, i);
  CHECK(sinks->saturated());  // 30 waiting, capacity 10: the pipeline pauses consumption
  REQUIRE(test::waitUntil("the other sink wrote them", [&] { return f.counted.load() == 31; }));
  f.stalled->release();
  sinks->flush();
  CHECK_FALSE(sinks->saturated());
  CHECK(f.stalled->writes() == 31);
  CHECK(f.finished.load() == 31);
}

TEST_CASE("when_full: drop_newest skips the judgments a full queue cannot hold, counted") {
  Fixture f;
  auto sinks = f.make(10, SinksOptions::WhenFull::kDropNewest);
  f.deliver(*sinks, 0);
  REQUIRE(
      test::waitUntil("the stalled sink entered its write", [&] { return f.stalled->inside(); }));
  // One at a time, so that the other sink's queue never fills: only the stalled one drops.
  for (int i = 1; i <= 30; ++i) {
    f.deliver(*sinks, i);
    REQUIRE(test::waitUntil("the other sink wrote it", [&] { return f.counted.load() == i + 1; }));
  }
  CHECK_FALSE(sinks->saturated());  // drop_newest never holds more than its capacity
  // 10 wait in the queue; 20 are dropped for this sink and their offsets move on once the
  // other sink wrote them.
  CHECK(f.metric("assay_sink_dropped_total{sink=\"stalled\"}") == 20);
  CHECK(f.metric("assay_sink_dropped_total{sink=\"counting\"}") == 0);
  REQUIRE(test::waitUntil("the dropped ones finished", [&] { return f.finished.load() == 20; }));
  f.stalled->release();
  sinks->flush();
  CHECK(f.stalled->writes() == 11);
  CHECK(f.counted.load() == 31);
  CHECK(f.finished.load() == 31);
}

TEST_CASE("a sink stuck in a write: flush gives up within its bound, behind() says so") {
  Fixture f;
  auto sinks = f.make(100, SinksOptions::WhenFull::kBlock);
  f.deliver(*sinks, 0);
  REQUIRE(
      test::waitUntil("the stalled sink entered its write", [&] { return f.stalled->inside(); }));
  f.deliver(*sinks, 1);
  f.deliver(*sinks, 2);
  // The stalled sink holds 3 (one in its write); flush waits its bound, then reports them.
  CHECK(sinks->flush(std::chrono::milliseconds(50)) == 3);
  CHECK(sinks->stuck(0).find("sink 'stalled' has written nothing for") != std::string::npos);
  CHECK(sinks->stuck(0).find("with 3 judgment(s) waiting") != std::string::npos);
  CHECK(sinks->stuck(3600).empty());  // not that long yet
  f.stalled->release();
  CHECK(sinks->flush(test::kSoon) == 0);
  CHECK(sinks->stuck(0).empty());
  CHECK(f.finished.load() == 3);
}
