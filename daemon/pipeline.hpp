#pragma once
/// The daemon's pipeline, one object owning every stage (docs/ARCHITECTURE.md):
///
///   Kafka consumer ─► size / key screen ─► parser ─► sampler ─► bounded queue ─► judge runner
///     ▲ offsets of finished events                               (workers; async judges'
///     │                                                            services: HTTP, ledger)
///     └──────────── sinks (JSON Lines, results topic) ◄── judgment ──┘   └─► score tracker
///
/// Members are declared in dependency order, so that destruction (reverse order) is right on
/// every path, a constructor that throws half-way included: the judge runner goes first (it
/// closes the queue, joins its workers and stops the judges' services before its judges go);
/// the consumer (its final commit) after the runner; the sinks after everything that writes to
/// them; the producer after the sinks that use it; the offset trackers after the producer,
/// whose last acknowledgements finish offsets; the embedded broker after both clients; the
/// admin endpoint, which reads only the registry and two flags, after them; the registry last.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "config/reload.hpp"
#include "daemon/ab/ab.hpp"
#include "daemon/admin_server.hpp"
#include "daemon/client_stats.hpp"
#include "daemon/consumer_stats.hpp"
#include "daemon/event_parser.hpp"
#include "daemon/judge_runner.hpp"
#include "daemon/kafka.hpp"
#include "daemon/offset_tracker.hpp"
#include "daemon/otlp_source.hpp"
#include "judges/judge_stats.hpp"
#include "judges/rate_limited_log.hpp"
#include "judges/services.hpp"
#include "sampling/bounded_queue.hpp"
#include "sampling/sampler.hpp"
#include "sampling/sampling_stats.hpp"
#include "sinks/registry.hpp"
#include "sinks/sink_stats.hpp"
#include "tracking/tracker.hpp"

namespace assay {

struct RunOptions {
  std::string replay_file;           ///< --replay: produce this JSON Lines file first
  std::string replay_feedback_file;  ///< --replay-feedback: into kafka.feedback_topic, key = id
  std::optional<double> exit_when_idle_s;  ///< --exit-when-idle SECONDS
  /// Tests: no worker thread; queued events are judged by judgeQueued() on the caller's thread.
  bool no_workers = false;
  /// assay backfill: the consumer joins no group and commits nothing; planBackfill() and
  /// startBackfill() choose what it reads; judgments say "backfill": true.
  bool backfill = false;
};

/// Asks a running pipeline to stop (async-signal-safe: one atomic exchange). Returns true if a
/// stop was requested before (a second SIGTERM ends the process at once).
bool requestStop();
/// Whether a stop was requested (any thread).
bool stopRequested();
/// SIGHUP: asks a running pipeline, on its next turn, to reopen its sinks' files (logrotate)
/// and to reload its configuration file (reloadConfig). Async-signal-safe: one atomic store.
void requestReload();

class Pipeline {
 public:
  /// Builds every stage, in the order of the members below. Throws std::exception whose
  /// message names the cause (a property librdkafka rejects, a port in use, a file that cannot
  /// be opened, an unset API key variable): a start-up failure, exit code 1.
  Pipeline(const Config& config, RunOptions run = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Produces the --replay files, polls until requestStop() or --exit-when-idle, then
  /// shutdown(). Returns 0 on a clean stop, 1 after a fatal consumer error, 3 when the stop
  /// was clean but the final offset commit failed (events since the last commit are consumed
  /// again by the next owner).
  int run();
  /// Produces RunOptions' --replay files into the topics (blocks until acknowledged).
  void replay();
  /// Stops in order: drain the queue and the asynchronous verdicts within
  /// limits.drain_timeout_ms, join the workers, stop the judges' services, flush the sinks,
  /// commit, log the summary. Called by run(); once.
  void shutdown();

  /// One turn of the poll loop: handles what one consumer poll returns (waiting at most
  /// `timeout_ms` for the first message, then taking up to kBatch that are already there),
  /// stores the offsets of finished events, and once a second refreshes the gauges. Returns
  /// false when the loop must end (a fatal consumer error, or idle for --exit-when-idle).
  bool pollOnce(int timeout_ms);
  /// With RunOptions::no_workers: judges every queued event on this thread; returns how many.
  std::size_t judgeQueued();

  /// assay backfill: the offsets of kafka.topic between two times (Unix epoch ms).
  std::vector<KafkaConsumer::Range> planBackfill(std::int64_t from_ms, std::int64_t to_ms);
  /// assay backfill: reads `ranges`; a message at or past its range's end is skipped unread.
  void startBackfill(const std::vector<KafkaConsumer::Range>& ranges);
  /// assay backfill: every range read to its end, and nothing left to judge or write.
  bool backfillDone() const;
  /// assay backfill: messages of the ranges read so far, and in all.
  std::pair<std::int64_t, std::int64_t> backfillProgress() const;

  /// Messages handled per pollOnce at most.
  static constexpr int kBatch = 500;

  // Observers, for tests and the exit summary.
  std::size_t queued() const { return queue_.size(); }
  const OffsetTracker& offsets() const { return offsets_; }
  bool assigned() const { return assigned_.load(); }
  unsigned short adminPort() const { return admin_.port(); }
  prometheus::Registry& registry() { return *registry_; }

 private:
  void handleMessage(const rd_kafka_message_t* m);
  void handleEvent(const rd_kafka_message_t* m);
  /// kafka.format otlp_*: the message's spans into the join; finished traces onward.
  void handleOtlp(const rd_kafka_message_t* m);
  /// Finished traces (finished_): events to the sampler and the queue, the rest released.
  void handleFinished();
  /// The event of `messages` is done (judged and written, or dropped): each message whose last
  /// trace it was is finished.
  void release(const std::vector<MessageRef>& messages);
  /// A sample leaves without a judgment (drop_newest): its message(s) are finished.
  void finishDropped(const WorkItem& item);
  void handleFeedback(const rd_kafka_message_t* m);
  void finishInvalid(const rd_kafka_message_t* m, const ParseOutcome& po);
  /// Queues a sample; when the backlog is full, drops it (drop_newest, counted) or holds it
  /// and pauses consumption (block).
  void enqueue(WorkItem item);
  /// block: the backlog is full (a full queue, or queue_capacity events waiting for an
  /// asynchronous verdict).
  bool backlogFull() const;
  /// block: moves held samples into the queue while there is room; resumes consumption once
  /// none is held and the backlog is down to half its capacity.
  void releaseHeld();
  /// block, while paused: releases held samples, then waits a little (at most `timeout_ms`,
  /// 5 ms) or polls one message to keep the group membership. False once resumed.
  bool waitWhilePaused(int timeout_ms);
  void everySecond();
  /// SIGHUP: reads config_.file again. Invalid (load, start-up or secret errors, a judge that
  /// cannot be built): logged with FILE:LINE:COL, nothing changes. Valid: `sampling`, `log`,
  /// `judges` and `budget.daily_limit_eur` apply at once (queued samples and calls in flight
  /// are kept); any other difference is logged as needing a restart. Counted in
  /// assay_config_reloads_total{result}.
  void reloadConfig();
  /// A reload that changes the judges or the global cap: builds every judge of `config` (kept
  /// alive in reloaded_), maps them onto the score tracker and hands them to the runner. False
  /// (logged) when a judge cannot be built: nothing changed.
  bool rebuildJudges(Config&& config, const ReloadDiff& diff);
  /// Why /readyz says 503 ("" = ready): no partition assignment yet, or a budget store that
  /// does not answer. Reads only atomics (the admin thread calls it).
  std::string notReady() const;
  /// /healthz: the judges that have been silent longer than they may with runs outstanding.
  std::string unhealthy() const;
  /// Each second: assay_judge_stalled, the stalls' log lines, unhealthy()'s text.
  void checkStalls();
  /// Hands the tracker the configured experiments' store (ab.experiments; nothing without).
  void connectAb(const Config& config);
  /// What the judge runner tells the pipeline: an event sampled (tracker join), a score
  /// (tracker), a judgment (sinks; its offset finished once every sink let go of it).
  JudgeRunner::Listener runnerListener();
  /// redact.*: the redactor and its assay_redactions_total counters, handed to the runner.
  void connectRedaction(const Config& config);
  /// assay_config_reloads_total, assay_config_last_reload_successful, assay_config_restart_needed.
  void registerReloadMetrics();
  /// The startup lines: OTLP mapping, sinks, feedback topic, admin endpoints.
  void logStartup(const Config& config) const;
  bool idle() const;
  /// systemd (service_notify.hpp): READY=1 once the budget store answers (the consumer
  /// subscribed and the admin endpoint listens since the constructor), then every 5 s STATUS=
  /// with the consumed and judged rates and readiness.
  void notifyService();
  /// After each settled rebalance: whether the feedback of the events judged here reaches this
  /// instance (assay_feedback_copartitioned, a warning when not).
  void checkCopartition();
  void logSummary() const;

  const Config& config_;
  const RunOptions run_;
  // ---- Metrics: every subsystem's series, on one registry (destroyed last).
  std::shared_ptr<prometheus::Registry> registry_;
  ConsumerStats consumer_stats_;
  ProcessStats process_stats_;
  KafkaClientStats kafka_stats_;  // fed by both clients' statistics callbacks
  SamplingStats sampling_stats_;
  JudgeStats judge_stats_;
  SinkStats sink_stats_;
  // ---- The A/B experiments (ab.experiments; null without): before the admin endpoint, which
  // ---- routes with them, and the tracker, which hands them ratings.
  std::unique_ptr<ab::AbService> ab_;
  // ---- The admin endpoint, first of the stages: a port in use fails start-up before anything
  // ---- joins the consumer group. Its handlers read only the registry and these atomics.
  std::atomic<bool> assigned_{false};      // the consumer group gave this instance partitions
  std::atomic<bool> store_ready_{true};    // the budget store answered (judges' services)
  std::atomic<bool> brokers_down_{false};  // librdkafka said all brokers are down
  std::atomic<std::int64_t> auth_failed_at_ns_{0};  // steady clock; 0 = never
  // The stalled judges ("" = none), for /healthz: written each second, read by the admin thread.
  mutable std::mutex stalled_mu_;
  std::string stalled_why_;
  std::set<std::string> stalled_judges_;  // poll thread only: to log each stall's start and end
  AdminServer admin_;
  // ---- Kafka clients and what finishes offsets. The offset trackers outlive the producer,
  // ---- whose destructor may still deliver acknowledgements that finish offsets.
  std::unique_ptr<EmbeddedBroker> broker_;  // null unless kafka.brokers is "embedded"
  std::string bootstrap_;
  OffsetTracker offsets_, feedback_offsets_;
  KafkaProducer producer_;
  ScoreTracker tracker_;
  Sinks sinks_;
  KafkaConsumer consumer_;
  // ---- The hot path.
  EventParser parser_;
  std::unique_ptr<OtlpSource> otlp_;  // kafka.format otlp_*: the span join (null otherwise)
  std::vector<FinishedTrace> finished_;
  Sampler sampler_;
  BoundedQueue<WorkItem> queue_;
  JudgeServices services_;
  std::vector<std::unique_ptr<Config>> reloaded_;  // configurations whose judges a reload built
  JudgeRunner runner_;  // destroyed first: closes the queue, joins, stops the services
  // ---- assay backfill (RunOptions::backfill): per partition [from, to) and the next offset.
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> backfill_ranges_;
  std::map<std::int32_t, std::int64_t> backfill_next_;
  std::int64_t backfill_total_ = 0, backfill_read_ = 0;
  bool backfill_started_ = false;
  // ---- Poll-thread state.
  std::deque<WorkItem> held_;  // block: samples consumed while the backlog was full
  // Events that may wait for asynchronous verdicts before consumption pauses: queue_capacity,
  // plus each batch: true judge's batch_max_pending_events (its verdicts take hours).
  std::size_t pending_limit_ = 0;
  bool paused_ = false;  // block: no consumer poll until the backlog halves
  std::chrono::steady_clock::time_point last_poll_{};
  std::chrono::milliseconds keepalive_{75'000};  // max.poll.interval.ms / 4
  RateLimitedLog invalid_log_, feedback_log_, kafka_log_;
  std::optional<std::chrono::steady_clock::time_point> last_activity_;
  std::chrono::steady_clock::time_point last_refresh_{};
  // checkCopartition(): the rebalance count last seen, when it changed, and the last checked.
  std::uint64_t copartition_seen_ = 0, copartition_checked_ = 0;
  bool copartition_known_ = false;
  std::chrono::steady_clock::time_point copartition_changed_at_{};
  std::chrono::steady_clock::time_point first_consumed_{};
  // Last message consumed from the events topic [0] and the feedback topic [1].
  std::array<std::chrono::steady_clock::time_point, 2> last_message_{
      std::chrono::steady_clock::now(), std::chrono::steady_clock::now()};
  std::atomic<std::int64_t> last_judged_ns_{0};  // steady clock, set by whoever delivers
  int exit_code_ = 0;
  bool ready_notified_ = false;
  std::string start_text_;    // the configuration file assayd started with (reloadConfig)
  std::string applied_text_;  // the file whose live parts were last applied (reloadConfig)
  prometheus::Family<prometheus::Counter>* reloads_ = nullptr;
  prometheus::Gauge* reload_ok_ = nullptr;       // assay_config_last_reload_successful
  prometheus::Gauge* restart_needed_ = nullptr;  // assay_config_restart_needed
  std::chrono::steady_clock::time_point status_at_{};
  double status_consumed_ = 0, status_judged_ = 0;
};

}  // namespace assay
