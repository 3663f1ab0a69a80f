// The pipeline assembled, top-down: the constructor builds the stages in the order of the
// members (pipeline.hpp); pollOnce() is one turn of the flow; shutdown() drains it.
#include "daemon/pipeline.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "core/clock.hpp"
#include "core/service_notify.hpp"
#include "daemon/version.hpp"
#include "daemon/wiring.hpp"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Pipeline::Pipeline(const Config& config, RunOptions run, PipelineWiring wiring)
    : config_(config),
      run_(std::move(run)),
      registry_(wiring.registry ? std::move(wiring.registry)
                                : std::make_shared<prometheus::Registry>()),
      process_stats_(*registry_),
      sampling_stats_(*registry_, static_cast<std::size_t>(config.tracking.max_label_values)),
      judge_stats_(*registry_),
      sink_stats_(*registry_),
      source_(config,
              run_.backfill ? KafkaSource::Mode::kBackfill : KafkaSource::Mode::kConsumerGroup,
              *registry_, kAssayVersion),
      tracker_(trackedJudges(config), config.tracking, *registry_),
      sinks_(config.sinks,
             SinkContext{&sink_stats_, source_.producerHandle(), config.kafka.results_topic}),
      sampler_(config.sampling.rate, config.sampling.rules),
      queue_(config.limits.queue_capacity),
      services_(config.budget, *registry_),
      review_((config.review.path.empty() && config.review.topic.empty()) || run_.backfill
                  ? nullptr
                  : std::make_unique<ReviewRouter>(config.review, *registry_,
                                                   source_.producerHandle())),
      runner_(buildJudges(config, services_), judge_stats_, queue_, runnerListener(),
              run_.no_workers ? 0 : config.limits.workers, &services_),
      backlog_(
          config.limits, pendingLimit(config), queue_, sampling_stats_,
          [this] { return runner_.pending(); }, [this] { return sinks_.saturated(); }) {
  freezeBaselines(tracker_, trackedJudges(config), config.tracking);
  if (run_.backfill) runner_.markBackfill();
  connectRedaction(config, runner_, *registry_);
  connectAb(config, wiring.ab, tracker_);
  if (sinks_.empty()) spdlog::warn("no sink configured: judgments go to the metrics only");
  if (!config.canary.file.empty() && !run_.backfill)
    canary_ = std::make_unique<Canary>(
        config, runner_, *registry_,
        loadCanarySet(config.canary, config.events, config.limits.max_event_bytes));
}

Pipeline::~Pipeline() = default;

JudgeRunner::Listener Pipeline::runnerListener() {
  return JudgeRunner::Listener{
      [this](const WorkItem& w) {
        if (review_) review_->remember(w.event);
        // An event joined from several messages has no one partition.
        tracker_.noteEvent(w.event.id, w.event.variant, w.event.app,
                           w.messages.empty() ? w.partition : -1);
      },
      [this](std::size_t i, const std::string& id, const std::string& variant, double score) {
        tracker_.record(i, id, variant, score);
      },
      [this](const Judgment& j, std::int32_t partition, std::int64_t offset,
             const std::vector<MessageRef>& messages) {
        if (review_) review_->route(j, epochMs());
        // The event's origin is finished when the last sink lets go of the token.
        sinks_.deliver(j, DeliveryToken(nullptr, [this, gate = finish_gate_.gate, partition, offset,
                                                  messages](void*) {
                         gate->pass([&] { source_.finish(Origin{partition, offset, messages}); });
                       }));
        last_judged_ns_ = steadyNs();
        sampling_stats_.finished.Increment();  // after every verdict's counter (coverage)
      }};
}

bool Pipeline::onEvent(Event&& event, const std::optional<KeyScreen>& screen, Origin& origin) {
  WorkItem item;
  item.sample = sampler_.decide(screen ? *screen : sampler_.screen(event.id), event);
  if (!item.sample.sampled) {  // a tenant or app rule below the key's rate
    sampled_out_.add();
    finished_.add();
    return false;
  }
  sampling_stats_.countSampled(event.tenant);
  item.event = std::move(event);
  item.partition = origin.partition;
  item.offset = origin.offset;
  item.messages = std::move(origin.messages);
  if (backlog_.admit(item)) return true;
  origin.messages = std::move(item.messages);  // dropped (drop_newest): the source finishes it
  sampling_stats_.finished.Increment();        // after assay_samples_dropped_total
  return false;
}

void Pipeline::ended(Ended why) {
  if (why == Ended::kScreenedOut) sampled_out_.add();
  finished_.add();
}

void Pipeline::flushCounts() {
  sampled_out_.flush();  // before finished: a scrape never sees an event finished uncounted
  finished_.flush();
}

std::string Pipeline::onFeedback(std::string_view payload, std::string_view key,
                                 std::int32_t partition) {
  std::string error, kind;
  if (auto f = parseFeedback(payload, key, error, kind)) {
    f->partition = partition;
    tracker_.onFeedback(*f);
    return "";
  }
  tracker_.countInvalidFeedback(kind);
  return error.empty() ? "invalid" : error;
}

// ---- The flow ---------------------------------------------------------------------------------

bool Pipeline::pollOnce(int timeout_ms) {
  service::watchdog();  // progress: the loop turns (systemd's WatchdogSec)
  // While the backlog holds back, the source takes no message (holding()), but for its
  // keep-alive; its turn (expired joins, delivery reports, commits) goes on.
  if (backlog_.paused() && backlog_.resume() && !source_.keepAlive(*this))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 5)));
  const bool polled = source_.poll(timeout_ms, *this, kBatch);
  queue_.wakeConsumers();  // the batch's events (Backlog::admit defers the wake-ups)
  flushCounts();
  if (!polled) {
    exit_code_ = 1;
    return false;
  }
  sampling_stats_.queue_depth.Set(static_cast<double>(queue_.size()));
  if (Clock::now() - last_refresh_ > std::chrono::seconds(1)) everySecond();
  return true;
}

void Pipeline::everySecond() {
  services_.refresh();  // queued on the ledger's thread: never waits for Redis here
  store_ready_ = services_.ready();
  source_.refresh();
  judge_stats_.pending.Set(static_cast<double>(runner_.pending()));
  process_stats_.refresh();
  tracker_.refresh();
  last_refresh_ = Clock::now();
}

std::size_t Pipeline::judgeQueued() {
  std::size_t n = 0;
  while (auto item = queue_.tryPop()) {
    runner_.run(*item);
    ++n;
  }
  sinks_.drain();  // what was judged here is written when this returns
  return n;
}

void Pipeline::setSampling(const SamplingOptions& sampling) {
  sampler_ = Sampler(sampling.rate, sampling.rules);
}

const Config* Pipeline::replaceJudges(std::unique_ptr<Config> config, const std::string& why) {
  std::vector<RunnableJudge> judges;
  try {
    judges = buildJudges(*config, services_);
  } catch (const std::exception& e) {  // e.g. an API key variable the service does not have
    spdlog::error("{}: {}; the running configuration stays", why, e.what());
    return nullptr;
  }
  const auto tracked = tracker_.setJudges(trackedJudges(*config));
  for (std::size_t i = 0; i < judges.size(); ++i) judges[i].tracked = tracked[i];
  runner_.replaceJudges(std::move(judges));
  source_.setExtra(config->events.extra);  // the new judges' pointer inputs
  reloaded_.push_back(std::move(config));
  return reloaded_.back().get();
}

std::string Pipeline::notReady() const {
  if (std::string why = source_.notReady(); !why.empty()) return why;
  if (!store_ready_) return "the budget store (budget.store) does not answer";
  return "";
}

bool Pipeline::drained() const {
  return backlog_.held() == 0 && queue_.size() == 0 && runner_.busy() == 0 &&
         runner_.pending() == 0;
}

bool Pipeline::idleFor(double seconds) const {
  const auto last = source_.lastActivity();
  return last && !source_.brokersDown() && drained() && source_.pending() == 0 &&
         Clock::now() - *last >= std::chrono::duration<double>(seconds);
}

bool Pipeline::backfillDone() const { return source_.backfillDone() && drained(); }

// ---- Start and stop ---------------------------------------------------------------------------

void Pipeline::replay() {
  if (!run_.replay_file.empty()) source_.replayEvents(run_.replay_file);
  if (!run_.replay_feedback_file.empty())
    source_.replayFeedback(run_.replay_feedback_file, [](const std::string& line) {
      std::string error, kind;
      const auto f = parseFeedback(line, "", error, kind);
      return f ? f->id : std::string();  // an invalid line is produced unkeyed and counted
    });
}

/// Stop polling (done) → let the queue and the asynchronous verdicts drain within
/// limits.drain_timeout_ms → drop what is left (counted, not committed: redelivered) → join the
/// workers and stop the judges' services → flush the sinks → commit.
void Pipeline::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  flushCounts();
  service::stopping();
  source_.logSuppressed();
  if (canary_) canary_->stop();  // a run in progress stops waiting for its verdicts
  queue_.close();
  const auto deadline = Clock::now() + std::chrono::milliseconds(config_.limits.drain_timeout_ms);
  while ((queue_.size() > 0 || runner_.busy() > 0 || runner_.pending() > 0) &&
         Clock::now() < deadline) {
    if (run_.no_workers) judgeQueued();
    source_.pollProducer();
    service::watchdog();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::size_t unjudged = queue_.takeAll().size(), held = backlog_.dropHeld();
  if (unjudged + held > 0) {
    sampling_stats_.dropped_shutdown.Increment(static_cast<double>(unjudged + held));
    sampling_stats_.finished.Increment(static_cast<double>(unjudged + held));
    spdlog::warn(
        "shutdown: {} sampled event(s) not judged within drain_timeout_ms{}; their offsets are "
        "not committed, so they are redelivered",
        unjudged,
        held ? fmt::format(" and {} held back by the full backlog (limits.when_full: block)", held)
             : "");
  }
  runner_.join();
  if (const int n = runner_.pending(); n > 0)
    spdlog::warn(
        "shutdown: {} event(s) still wait for an asynchronous verdict after drain_timeout_ms; "
        "they are not committed and will be judged again",
        n);
  services_.stop();          // abandons calls still running; records the settlements queued
  runner_.countAbandoned();  // their verdicts never come: each counted for its judge
  sampling_stats_.finished.Increment(static_cast<double>(runner_.pending()));
  tracker_.refresh();                     // the last scrape shows the final statistics
  sinks_.flush(std::chrono::seconds(5));  // a sink stuck in a write is logged, not waited for
  source_.flushProducer(10000);
  if (!source_.close() && exit_code_ == 0) exit_code_ = 3;
  sampling_stats_.queue_depth.Set(0);
}

}  // namespace assay
