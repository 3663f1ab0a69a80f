#pragma once
/// The judge runner: judges each sampled event with every configured judge that its nested
/// rate and `run_if` admit, and hands on the event's judgment once every verdict is in.
///
/// Order (docs/configuration.md, "run_if"): the synchronous judges first, in configuration
/// order, each seeing the verdicts of those before it; then every asynchronous judge (cost
/// class kRemoteCall) whose conditions hold on those verdicts, all started at once. The last
/// asynchronous verdict to arrive completes the judgment, on whichever thread delivered it.
/// A judge that throws gets the outcome judge_error (logged, rate-limited); the worker and the
/// event's other verdicts go on.
///
/// Threads: `workers` threads pop the queue (an RAII pool: the destructor closes the queue and
/// joins them, then stops the judges' services so that no callback outlives the judges).
/// run() may also be called directly (tests, no threads).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "config/options.hpp"
#include "core/judgment.hpp"
#include "judges/judge.hpp"
#include "judges/judge_stats.hpp"
#include "judges/redaction.hpp"
#include "judges/services.hpp"
#include "sampling/bounded_queue.hpp"
#include "sampling/sampler.hpp"
#include "sources/offset_tracker.hpp"

namespace assay {

/// A sampled event on its way to the judges; `partition` and `offset` come back with its
/// judgment (they say which Kafka offset the judgment finishes).
struct WorkItem {
  Event event;
  SampleDecision sample;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  /// kafka.format otlp_*: every message that held one of the event's spans (the event is
  /// finished for each of them; partition and offset are then unused).
  std::vector<MessageRef> messages;
};

/// A configured judge, ready to run.
struct RunnableJudge {
  std::string name;
  JudgeInfo info;
  double rate = 1.0;  ///< nested sampling rate, (0, 1]
  std::vector<RunIfCondition> run_if;
  std::unique_ptr<Judge> judge;
  bool asynchronous = false;          ///< cost class kRemoteCall: judgeAsync
  std::span<const Outcome> outcomes;  ///< its type's outcomes besides ok (series from the start)
  /// Its index in the score tracker, passed to Listener::scored (default: its configuration
  /// index; after a reload, ScoreTracker::setJudges says).
  std::optional<std::size_t> tracked;
  /// Its version (JudgeConfig::version): written in its verdicts and its series' judge_version
  /// label; null in tests that build judges by hand ("" label, no judge_version written).
  std::shared_ptr<const JudgeVersion> version{};
};

/// Builds every configured judge through its factory, in configuration order. Throws
/// std::runtime_error naming the judge and the option ("judges[2].api_key_env: …").
std::vector<RunnableJudge> buildJudges(const Config& config, JudgeServices& services);

/// N threads running one function until a stop function makes it return; the destructor calls
/// stop and joins (also when a later thread fails to start).
class WorkerPool {
 public:
  WorkerPool(int threads, const std::function<void()>& body, std::function<void()> stop);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  /// Calls stop and joins every thread. Idempotent.
  void join();

 private:
  std::function<void()> stop_;
  std::vector<std::thread> threads_;
};

class JudgeRunner {
 public:
  /// Where verdicts and judgments go. Each may run on a worker or on an asynchronous judge's
  /// thread, concurrently.
  struct Listener {
    std::function<void(const WorkItem&)> started;  ///< an event enters judging
    /// A successful score of the judge whose RunnableJudge::tracked is `index` on event `id`.
    std::function<void(std::size_t index, const std::string& id, const std::string& variant,
                       double score)>
        scored;
    /// Every verdict of the event is in (verdicts in configuration order).
    std::function<void(const Judgment& judgment, std::int32_t partition, std::int64_t offset,
                       const std::vector<MessageRef>& messages)>
        judged;
  };

  /// Starts `workers` threads (0: none, run() is called by the owner) popping `queue`.
  /// `services` (may be null) is stopped by the destructor before the judges are destroyed.
  JudgeRunner(std::vector<RunnableJudge> judges, JudgeStats& stats, BoundedQueue<WorkItem>& queue,
              Listener listener, int workers, JudgeServices* services);
  ~JudgeRunner();
  /// redact (judges/redaction.hpp): every asynchronous (LLM) judge sees the event redacted,
  /// the local judges too with RedactOptions::local_judges, the verdicts' evidence with
  /// RedactOptions::sinks; `counters[i]` counts the replacements of redactor->labels()[i].
  /// Call before the first run().
  void setRedaction(std::shared_ptr<const Redactor> redactor,
                    std::vector<prometheus::Counter*> counters);
  /// assay backfill: every judgment says "backfill": true. Before the first run().
  void markBackfill() { backfill_ = true; }
  JudgeRunner(const JudgeRunner&) = delete;
  JudgeRunner& operator=(const JudgeRunner&) = delete;

  /// Judges one event on this thread; asynchronous verdicts arrive later.
  void run(const WorkItem& item);
  /// Closes the queue and joins the workers (they finish what is queued first).
  void join();

  /// Workers judging an event right now.
  int busy() const { return busy_.load(); }
  /// Events whose asynchronous verdicts are not all in.
  int pending() const { return pending_.load(); }

  /// An asynchronous judge's silence: runs outstanding, and how long since it last delivered a
  /// verdict (or, when it had none outstanding before, since its oldest outstanding run began).
  struct Silence {
    std::string judge;
    int outstanding = 0;                 ///< runs started whose verdict is not in
    double silent_seconds = 0;           ///< 0 when nothing is outstanding
    double limit_seconds = 0;            ///< Judge::maxSilence()
    bool stalled = false;                ///< outstanding > 0 and silent_seconds > limit_seconds
    JudgeStats::Judge* stats = nullptr;  ///< its series (assay_judge_stalled)
  };
  /// Every judge that has a Judge::maxSilence(): of the sets a reload replaced (oldest first;
  /// idle ones too, so that their version's assay_judge_stalled goes back to 0), then of the
  /// current set, in configuration order. Any thread.
  std::vector<Silence> silences() const;
  /// At the stop, once the judges' services stopped (no verdict comes after): every run still
  /// outstanding counted in its judge's assay_judge_abandoned_total. Poll thread.
  void countAbandoned();
  /// The judges events are judged with from now on (a copy of the current set's names).
  std::vector<std::string> judgeNames() const;
  /// A judge of the current set, for a run outside the event flow (the canary): called
  /// directly, it counts in none of the judge's series. Valid as long as the runner (a reload
  /// keeps replaced judges).
  struct Handle {
    std::string name, version;  ///< version: "" when built without one
    JudgeInfo info;
    const Judge* judge = nullptr;
    bool asynchronous = false;
  };
  std::vector<Handle> currentJudges() const;
  /// A configuration reload: judge `index`'s nested sampling rate from now on (any thread).
  void setRate(std::size_t index, double rate);
  double rate(std::size_t index) const;
  /// A configuration reload: events that start judging from now on are judged by `judges`;
  /// an event already being judged (queued samples are not: they start later) finishes with
  /// the judges it started with, whose objects are kept until the runner is destroyed (a few
  /// KB a reload; their asynchronous callbacks may still run). Any thread.
  void replaceJudges(std::vector<RunnableJudge> judges);

 private:
  struct Pending;
  struct Set;
  struct Condition {
    std::size_t judge = 0;  // index of the earlier judge
    RunIfCondition condition;
  };
  std::shared_ptr<Set> makeSet(std::vector<RunnableJudge> judges);
  std::shared_ptr<Set> current() const;
  bool admitted(const Set& set, std::size_t index, const Pending& p) const;
  JudgedVerdict record(const Set& set, std::size_t index, const Pending& p, Verdict v,
                       double seconds);
  Verdict runSync(const Set& set, std::size_t index, const Event& event);
  void startAsync(std::size_t index, const Event& event, const std::shared_ptr<Pending>& p);
  void complete(Pending& p);
  /// A new set: names never configured before join ever_, each seeded with the events
  /// completed so far as not_configured; every set's absent list is recomputed. set_mu_ held.
  void updateCoverage(Set& added);

  mutable std::mutex set_mu_;  // guards current_ and retired_
  // Coverage (docs/metrics.md): every judge ever configured gets one terminal count per event.
  // Guards ever_, completed_ and every Set's absent list.
  mutable std::mutex coverage_mu_;
  std::vector<std::pair<std::string, JudgeStats::Judge*>> ever_;  // name → its latest series
  std::uint64_t completed_ = 0;  // events completed (their judgment handed on) so far
  std::shared_ptr<Set> current_;
  std::vector<std::shared_ptr<Set>> retired_;  // replaced sets, kept to the end
  JudgeStats& judge_stats_;
  BoundedQueue<WorkItem>& queue_;
  Listener listener_;
  JudgeServices* services_;
  std::shared_ptr<const Redactor> redactor_;  // null: no redaction
  bool backfill_ = false;
  std::vector<prometheus::Counter*> redaction_counters_;  // per redactor_->labels()
  std::atomic<int> busy_{0}, pending_{0};
  std::unique_ptr<WorkerPool> pool_;  // last: its threads use everything above
};

}  // namespace assay
