#pragma once
/// The daemon's pipeline: components that do not know it, assembled so that data flows one way
/// (docs/ARCHITECTURE.md):
///
///   source ─► sampler ─► backlog (bounded queue) ─► judge runner ─► sinks
///     ▲  (sources/)                                  (workers;       └─► score tracker
///     └──────── finish(origin) once every sink let go of the judgment ───┘
///
/// The Controller (daemon/controller.hpp) supervises it from outside, through the narrow
/// setters below: SIGHUP reload, readiness, systemd notify, the exit summary.
///
/// Members are declared in dependency order, so that destruction (reverse order) is right on
/// every path, a constructor that throws half-way included: the judge runner goes first (it
/// closes the queue, joins its workers and stops the judges' services before its judges go);
/// the sinks after everything that writes to them; the source (its consumer's final commit,
/// then the producer the results sink used, then the offsets) after the sinks; the registry
/// last.

#include <prometheus/registry.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "core/batched_counter.hpp"
#include "daemon/ab/ab.hpp"
#include "daemon/backlog.hpp"
#include "daemon/canary.hpp"
#include "daemon/judge_runner.hpp"
#include "daemon/review.hpp"
#include "judges/judge_stats.hpp"
#include "judges/services.hpp"
#include "sampling/bounded_queue.hpp"
#include "sampling/sampler.hpp"
#include "sampling/sampling_stats.hpp"
#include "sinks/registry.hpp"
#include "sinks/sink_stats.hpp"
#include "sources/client_stats.hpp"
#include "sources/kafka_source.hpp"
#include "tracking/tracker.hpp"

namespace assay {

struct RunOptions {
  std::string replay_file;           ///< --replay: produce this JSON Lines file first
  std::string replay_feedback_file;  ///< --replay-feedback: into kafka.feedback_topic, key = id
  std::optional<double> exit_when_idle_s;  ///< --exit-when-idle SECONDS
  /// Tests: no worker thread; queued events are judged by judgeQueued() on the caller's thread.
  bool no_workers = false;
  /// assay backfill: the source joins no group and commits nothing (KafkaSource::kBackfill);
  /// judgments say "backfill": true.
  bool backfill = false;
};

/// What the Controller lends the pipeline: the registry its series go on, and the A/B
/// experiments the score tracker hands ratings to (null: none). Empty: a registry of its own.
struct PipelineWiring {
  std::shared_ptr<prometheus::Registry> registry;
  ab::AbService* ab = nullptr;
};

class Pipeline final : private Downstream {
 public:
  /// Builds every stage, in the order of the members below. Throws std::exception whose
  /// message names the cause (a property librdkafka rejects, a file that cannot be opened, an
  /// unset API key variable): a start-up failure, exit code 1.
  Pipeline(const Config& config, RunOptions run = {}, PipelineWiring wiring = {});
  ~Pipeline() override;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Produces RunOptions' --replay files into the topics (blocks until acknowledged).
  void replay();
  /// One turn: what one source poll returns (waiting at most `timeout_ms` for the first
  /// message, then up to kBatch) through the sampler into the backlog; while the backlog holds
  /// back, only the source's keep-alive. Once a second, the gauges. False when the loop must
  /// end (a fatal source error).
  bool pollOnce(int timeout_ms);
  /// With RunOptions::no_workers: judges every queued event on this thread and waits until the
  /// sinks' queues are written; returns how many.
  std::size_t judgeQueued();
  /// Stops in order: drain the queue and the asynchronous verdicts within
  /// limits.drain_timeout_ms, join the workers, stop the judges' services, flush the sinks,
  /// commit. Once.
  void shutdown();
  /// 0 after a clean stop, 1 after a fatal source error, 3 when the final offset commit failed
  /// (events since the last commit are consumed again by the next owner).
  int exitCode() const { return exit_code_; }

  /// Messages handled per pollOnce at most.
  static constexpr int kBatch = 500;

  // ---- Narrow setters (the Controller, on the poll thread).
  /// sampling.rate and sampling.rules, from the next message on.
  void setSampling(const SamplingOptions& sampling);
  /// A judge's nested sampling rate.
  void setJudgeRate(std::size_t index, double rate) { runner_.setRate(index, rate); }
  /// Builds every judge of `config` (kept alive here), maps them onto the score tracker, hands
  /// them to the runner and their JSON Pointer inputs to the source; returns the kept
  /// configuration. Null (logged with `why`) when a judge cannot be built: nothing changed.
  const Config* replaceJudges(std::unique_ptr<Config> config, const std::string& why);
  /// SIGHUP: every sink reopens its output (logrotate).
  void reopenSinks() { sinks_.reopen(); }

  // ---- Observers (the Controller, tests, assay backfill).
  KafkaSource& source() { return source_; }
  const KafkaSource& source() const { return source_; }
  const OffsetTracker& offsets() const { return source_.offsets(); }
  bool assigned() const { return source_.assigned(); }
  /// kafka.brokers, or the embedded broker's address (tests read its topics).
  const std::string& bootstrapServers() const { return source_.bootstrapServers(); }
  std::size_t queued() const { return queue_.size(); }
  prometheus::Registry& registry() { return *registry_; }
  const prometheus::Registry& registry() const { return *registry_; }
  /// Why the pipeline is not ready ("" = ready): the source's reason, or a budget store that
  /// does not answer. Thread-safe.
  std::string notReady() const;
  /// The budget store answered at the last check (once a second).
  bool storeReady() const { return store_ready_.load(); }
  /// Nothing queued, held, being judged or waiting for a verdict, and nothing pending at the
  /// source, for `seconds` since its last message.
  bool idleFor(double seconds) const;
  /// assay backfill: the ranges read to their end and nothing left to judge or write.
  bool backfillDone() const;
  const JudgeRunner& runner() const { return runner_; }
  /// The judges' canary (canary.file), or null.
  Canary* canary() { return canary_.get(); }
  const SamplingStats& samplingStats() const { return sampling_stats_; }
  const SinkStats& sinkStats() const { return sink_stats_; }
  /// The sinks stuck in a write for `after_s` seconds with judgments waiting ("" = none).
  std::string stuckSinks(double after_s) const { return sinks_.stuck(after_s); }
  /// When the last judgment was delivered (steady clock, ns; 0 = none).
  std::int64_t lastJudgedNs() const { return last_judged_ns_.load(); }

 private:
  // Downstream: what the source hands on.
  KeyScreen screen(std::string_view key_or_id) override { return sampler_.screen(key_or_id); }
  bool onEvent(Event&& event, const std::optional<KeyScreen>& screen, Origin& origin) override;
  void ended(Ended why) override;
  /// Adds the poll thread's batched counts (sampled out, finished) to their counters.
  void flushCounts();
  bool holding() const override { return backlog_.paused(); }
  std::string onFeedback(std::string_view payload, std::string_view key,
                         std::int32_t partition) override;
  /// What the judge runner tells the pipeline: an event sampled (tracker join), a score
  /// (tracker), a judgment (sinks; its origin finished once every sink let go of it).
  JudgeRunner::Listener runnerListener();
  /// Nothing held, queued, being judged or waiting for an asynchronous verdict.
  bool drained() const;
  void everySecond();

  const Config& config_;
  const RunOptions run_;
  std::shared_ptr<prometheus::Registry> registry_;
  ProcessStats process_stats_;
  SamplingStats sampling_stats_;
  // The poll thread's counts of events that end there, flushed after each poll batch.
  BatchedCounter sampled_out_{sampling_stats_.sampled_out}, finished_{sampling_stats_.finished};
  JudgeStats judge_stats_;
  SinkStats sink_stats_;
  KafkaSource source_;
  ScoreTracker tracker_;
  FinishGateCloser finish_gate_;  // closes after the sinks go: no late finish reaches source_
  Sinks sinks_;
  Sampler sampler_;
  BoundedQueue<WorkItem> queue_;
  JudgeServices services_;
  std::vector<std::unique_ptr<Config>> reloaded_;  // configurations whose judges a reload built
  // review.path / review.topic: routing (outlives the runner's workers; its topic lines go
  // through source_'s producer, flushed with it at the stop)
  std::unique_ptr<ReviewRouter> review_;
  JudgeRunner runner_;  // destroyed first: closes the queue, joins, stops the services
  Backlog backlog_;
  std::unique_ptr<Canary> canary_;       // canary.file: its schedule (stopped before the runner)
  std::atomic<bool> store_ready_{true};  // the budget store answered
  std::atomic<std::int64_t> last_judged_ns_{0};  // steady clock, set by whoever delivers
  std::chrono::steady_clock::time_point last_refresh_{};
  int exit_code_ = 0;
  bool shut_down_ = false;
};

}  // namespace assay
