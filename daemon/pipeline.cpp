// The pipeline assembled, top-down: the constructor builds the stages in the order of the
// members (pipeline.hpp), run() is the poll loop and the shutdown.
#include "daemon/pipeline.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <iterator>
#include <thread>

#include "config/loader.hpp"
#include "config/reload.hpp"
#include "config/yaml_load.hpp"
#include "core/exposition.hpp"
#include "daemon/check_config.hpp"
#include "daemon/log_setup.hpp"
#include "daemon/service_notify.hpp"
#include "daemon/version.hpp"
#include "judges/log_text.hpp"

namespace assay {
namespace {

/// assay_ab_route_requests_waiting, when experiments are configured (else nullptr).
prometheus::Gauge* routesWaitingGauge(const Config& config, prometheus::Registry& registry) {
  if (config.ab.experiments.empty()) return nullptr;
  return &prometheus::BuildGauge()
              .Name("assay_ab_route_requests_waiting")
              .Help(
                  "/v1/route requests received and not yet answered (at most 256; more are "
                  "answered 503): a rising value is a slow Redis")
              .Register(registry)
              .Add({});
}

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reopen{false};

std::int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

/// What the tracker follows: every configured judge's criterion and scale, in config order.
std::vector<TrackedJudge> trackedJudges(const Config& config) {
  std::vector<TrackedJudge> out;
  for (const auto& jc : config.judges) {
    const JudgeInfo info = jc.factory->info(jc.values);
    out.push_back({jc.name, info.criterion, info.min_score, info.max_score, info.graded});
  }
  return out;
}

std::unique_ptr<EmbeddedBroker> embeddedBroker(const KafkaOptions& k) {
  if (k.brokers != "embedded") return nullptr;
  auto broker = std::make_unique<EmbeddedBroker>(
      k.partitions,
      std::vector<std::string>{k.topic, k.results_topic, k.dead_letter_topic, k.feedback_topic});
  spdlog::info(
      "kafka: embedded broker (librdkafka mock cluster) at {}, topic '{}' with {} partitions",
      broker->bootstrapServers(), k.topic, k.partitions);
  return broker;
}

std::vector<std::string> topicsOf(const KafkaOptions& k) {
  std::vector<std::string> out{k.topic};
  if (!k.feedback_topic.empty()) out.push_back(k.feedback_topic);
  return out;
}

std::string_view keyOf(const rd_kafka_message_t* m) {
  return {static_cast<const char*>(m->key), m->key ? m->key_len : 0};
}

std::string_view payloadOf(const rd_kafka_message_t* m) {
  return {static_cast<const char*>(m->payload), m->len};
}

}  // namespace

bool requestStop() { return g_stop.exchange(true); }
bool stopRequested() { return g_stop.load(); }
void requestReload() { g_reopen.store(true); }

Pipeline::Pipeline(const Config& config, RunOptions run)
    : config_(config),
      run_(std::move(run)),
      registry_(std::make_shared<prometheus::Registry>()),
      consumer_stats_(*registry_, topicsOf(config.kafka), kAssayVersion),
      process_stats_(*registry_),
      kafka_stats_(*registry_),
      sampling_stats_(*registry_, static_cast<std::size_t>(config.tracking.max_label_values)),
      judge_stats_(*registry_),
      sink_stats_(*registry_),
      ab_(config.ab.experiments.empty() ? nullptr
                                        : std::make_unique<ab::AbService>(
                                              config.ab, ab::makeStore(config.budget), *registry_)),
      admin_(config.admin.listen,
             {[this] { return serializeMetrics(*registry_); }, [this] { return notReady(); },
              [this] { return unhealthy(); },
              [this](std::string_view query) {
                return ab_ ? ab_->route(query)
                           : std::pair<int, std::string>{
                                 404,
                                 "{\"error\":\"no experiment is configured (ab.experiments)\"}\n"};
              },
              // The gauge exists before the server starts: this runs on the admin thread,
              // which must not read the Pipeline's members still being constructed.
              [gauge = routesWaitingGauge(config, *registry_)](int waiting) {
                if (gauge) gauge->Set(waiting);
              }}),
      broker_(embeddedBroker(config.kafka)),
      bootstrap_(broker_ ? broker_->bootstrapServers() : config.kafka.brokers),
      producer_(config.kafka, bootstrap_, &kafka_stats_),
      tracker_(trackedJudges(config), config.tracking, *registry_),
      sinks_(config.sinks,
             SinkContext{&sink_stats_, producer_.handle(), config.kafka.results_topic}),
      consumer_(config.kafka, bootstrap_, offsets_, run_.backfill ? nullptr : &feedback_offsets_,
                &kafka_stats_, !run_.backfill),
      parser_(config.events, config.limits.max_event_bytes),
      otlp_(config.kafka.format == EventFormat::kAssayJson
                ? nullptr
                : std::make_unique<OtlpSource>(config, *registry_)),
      sampler_(config.sampling.rate, config.sampling.rules),
      queue_(config.limits.queue_capacity),
      services_(config.budget, *registry_),
      runner_(buildJudges(config, services_), judge_stats_, queue_, runnerListener(),
              run_.no_workers ? 0 : config.limits.workers, &services_) {
  freezeBaselines(tracker_, trackedJudges(config), config.tracking);
  pending_limit_ = config.limits.queue_capacity;
  for (const auto& j : config.judges)
    if (j.values.getBool("batch", false))
      pending_limit_ +=
          static_cast<std::size_t>(j.values.getInt("batch_max_pending_events", 50'000));
  if (run_.backfill) runner_.markBackfill();
  connectRedaction(config);
  if (otlp_) consumer_.onRevoke([this](const std::vector<std::int32_t>& p) { otlp_->forget(p); });
  connectAb(config);
  registerReloadMetrics();
  start_text_ = config.text;
  applied_text_ = start_text_;
  for (const auto& [key, value] : config.kafka.properties)  // checked by the loader
    if (key == "max.poll.interval.ms")
      keepalive_ = std::chrono::milliseconds(std::stoll(value) / 4);
  logStartup(config);
}

Pipeline::~Pipeline() = default;

JudgeRunner::Listener Pipeline::runnerListener() {
  return JudgeRunner::Listener{
      [this](const WorkItem& w) {
        // An OTLP event is made of spans from several messages: no one partition.
        tracker_.noteEvent(w.event.id, w.event.variant, w.event.app,
                           w.messages.empty() ? w.partition : -1);
      },
      [this](std::size_t i, const std::string& id, const std::string& variant, double score) {
        tracker_.record(i, id, variant, score);
      },
      [this](const Judgment& j, std::int32_t partition, std::int64_t offset,
             const std::vector<MessageRef>& messages) {
        // The event's offset is finished when the last sink lets go of the token.
        sinks_.deliver(j, DeliveryToken(nullptr, [this, partition, offset, messages](void*) {
                         if (messages.empty())
                           offsets_.finish(partition, offset);
                         else
                           release(messages);
                       }));
        last_judged_ns_ = steadyNs();
      }};
}

void Pipeline::connectRedaction(const Config& config) {
  if (config.redact.detectors.empty() && config.redact.patterns.empty()) return;
  auto redactor = std::make_shared<const Redactor>(config.redact);
  auto& family = prometheus::BuildCounter()
                     .Name("assay_redactions_total")
                     .Help(
                         "Values replaced by a placeholder before an LLM call (redact), by "
                         "detector (built-in or the name of a redact.patterns entry)")
                     .Register(*registry_);
  std::vector<prometheus::Counter*> counters;
  std::string names;
  for (const auto& label : redactor->labels()) {
    counters.push_back(&family.Add({{"detector", label}}));
    names += (names.empty() ? "" : ", ") + label;
  }
  runner_.setRedaction(redactor, std::move(counters));
  spdlog::info("redact: {} replaced before every LLM call{}{}", names,
               config.redact.local_judges ? ", for the local judges too" : "",
               config.redact.sinks ? ", and in the judgments' evidence" : "");
}

void Pipeline::registerReloadMetrics() {
  reloads_ = &prometheus::BuildCounter()
                  .Name("assay_config_reloads_total")
                  .Help(
                      "Configuration reloads (SIGHUP) by result: applied, restart_needed (valid, "
                      "but some change needs a restart), rejected (invalid: nothing applied)")
                  .Register(*registry_);
  for (const char* result : {"applied", "restart_needed", "rejected"})
    reloads_->Add({{"result", result}});
  reload_ok_ = &prometheus::BuildGauge()
                    .Name("assay_config_last_reload_successful")
                    .Help("1 unless the last configuration reload (SIGHUP) was rejected")
                    .Register(*registry_)
                    .Add({});
  reload_ok_->Set(1);
  restart_needed_ = &prometheus::BuildGauge()
                         .Name("assay_config_restart_needed")
                         .Help(
                             "1 when the configuration file differs from the running one in a "
                             "part that only a restart applies (the last valid reload said so)")
                         .Register(*registry_)
                         .Add({});
}

void Pipeline::logStartup(const Config& config) const {
  if (otlp_)
    spdlog::info(
        "kafka: {} reads OpenTelemetry traces ({}), mapping {}; a trace waits up to {} ms "
        "after its last span",
        config.kafka.topic,
        config.kafka.format == EventFormat::kOtlpJson ? "otlp_json" : "otlp_proto",
        config.otlp.mapping, config.otlp.join_timeout_ms);
  if (sinks_.empty()) spdlog::warn("no sink configured: judgments go to the metrics only");
  if (!config.kafka.feedback_topic.empty())
    spdlog::info("kafka: feedback from '{}' (ratings and annotations, joined by id)",
                 config.kafka.feedback_topic);
  const std::string host = config.admin.listen.substr(0, config.admin.listen.rfind(':'));
  spdlog::info("admin: http://{}:{}/metrics, /healthz, /readyz", host.empty() ? "0.0.0.0" : host,
               admin_.port());
}

void Pipeline::connectAb(const Config& config) {
  if (!ab_) return;
  tracker_.setSharedAb(
      {[this](const std::string& experiment, const std::string& variant, const std::string& unit,
              int stars, const std::string& id) -> const char* {
         const auto* e = ab_->find(experiment);
         return e ? ab_->rate(*e, variant, unit, stars, id) : nullptr;
       },
       [this] {
         std::vector<SharedExperiment> out;
         for (const auto& s : ab_->snapshot()) {
           if (!s.available && s.decision.ratings.empty()) continue;  // never answered
           SharedExperiment x;
           x.name = s.experiment;
           x.arms = s.arms;
           x.ratings = s.decision.ratings;
           x.chi = s.decision.chi;
           x.anytime_p = s.decision.anytime_p;
           if (const auto& d = s.table.recorded) {
             x.decided = true;
             x.winner = d->winner;
             x.decision_p = d->p;
             x.decision_time_s = static_cast<double>(d->at_ms) / 1000.0;
             x.decision_ratings = d->ratings;
           }
           out.push_back(std::move(x));
         }
         return out;
       }});
  spdlog::info("ab: {} experiment(s) routed at /v1/route, decided by the {} rule, tables in {}",
               config.ab.experiments.size(),
               config.ab.decision == "anytime" ? "anytime-valid" : "chi-square (peeking)",
               config.budget.store == "memory" ? "this process's memory (store: memory)"
                                               : "the shared budget store");
}

// ---- The poll loop ----------------------------------------------------------------------------

int Pipeline::run() {
  replay();
  while (!g_stop.load() && pollOnce(100)) {
  }
  if (g_stop) spdlog::info("stop requested (SIGTERM or SIGINT): stopping");
  shutdown();
  return exit_code_;
}

bool Pipeline::pollOnce(int timeout_ms) {
  service::watchdog();  // progress: the loop turns (systemd's WatchdogSec)
  const bool paused = paused_ && waitWhilePaused(timeout_ms);
  for (int n = 0; n < kBatch && !paused && !paused_; ++n) {
    rd_kafka_message_t* m = consumer_.poll(n == 0 ? timeout_ms : 0);
    last_poll_ = Clock::now();
    if (!m) break;
    const bool fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
    if (fatal) {
      spdlog::critical("kafka: fatal consumer error: {}; stopping", rd_kafka_message_errstr(m));
      exit_code_ = 1;
    } else {
      handleMessage(m);
    }
    rd_kafka_message_destroy(m);
    if (fatal) return false;
  }
  if (otlp_) {  // traces past the join timeout
    otlp_->expire(finished_);
    if (!finished_.empty()) handleFinished();
  }
  producer_.poll();  // delivery reports: results-topic tokens, dead letters
  if (consumer_.takeAllBrokersDown() && !brokers_down_) {
    brokers_down_ = true;
    consumer_stats_.brokers_reachable.Set(0);
    kafka_stats_.allBrokersDown();
    spdlog::warn("kafka: no broker answers ({}); /readyz says 503 until one does",
                 config_.kafka.brokers);
  }
  if (const int n = consumer_.takeAuthenticationFailures(); n > 0) {
    consumer_stats_.authentication_failures.Increment(n);
    auth_failed_at_ns_ = steadyNs();
  }
  if (consumer_.assigned() && !last_activity_)
    last_activity_ = Clock::now();  // the idle timer starts at the first assignment
  assigned_ = consumer_.inAssignment();
  consumer_.storeFinishedOffsets();
  consumer_.commitFinished();
  if (g_reopen.exchange(false)) {
    spdlog::info("SIGHUP: reopening the sinks' files, reloading {}", config_.file);
    sinks_.reopen();
    reloadConfig();
  }
  sampling_stats_.queue_depth.Set(static_cast<double>(queue_.size()));
  if (Clock::now() - last_refresh_ > std::chrono::seconds(1)) everySecond();
  if (run_.exit_when_idle_s && idle()) {
    spdlog::info("idle for {} s: stopping", *run_.exit_when_idle_s);
    return false;
  }
  return true;
}

void Pipeline::handleMessage(const rd_kafka_message_t* m) {
  if (m->err) {
    long suppressed = 0;
    if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && kafka_log_.allow(suppressed))
      spdlog::warn("kafka: {}{}", rd_kafka_message_errstr(m), RateLimitedLog::note(suppressed));
    return;
  }
  last_activity_ = Clock::now();
  const bool feedback = consumer_.isFeedback(m);
  last_message_[feedback ? 1 : 0] = *last_activity_;
  if (feedback)
    handleFeedback(m);
  else
    handleEvent(m);
}

void Pipeline::handleEvent(const rd_kafka_message_t* m) {
  if (first_consumed_ == Clock::time_point{}) first_consumed_ = Clock::now();
  consumer_stats_.consumed.Increment();
  if (offsets_.alreadyFinished(m->partition, m->offset)) {  // judged and written before
    consumer_stats_.replay_skipped.Increment();
    offsets_.skip(m->partition, m->offset);
    return;
  }
  if (run_.backfill) {  // only the planned range of each partition is read
    const auto it = backfill_ranges_.find(m->partition);
    if (it == backfill_ranges_.end() || m->offset >= it->second.second ||
        m->offset < it->second.first) {
      offsets_.skip(m->partition, m->offset);
      return;
    }
    ++backfill_read_;
    backfill_next_[m->partition] = m->offset + 1;
  }
  if (otlp_) return handleOtlp(m);
  const KeyScreen screen = sampler_.screen(keyOf(m));
  if (screen.rejected) {  // not sampled whatever it holds: never parsed
    offsets_.skip(m->partition, m->offset);
    return;
  }
  WorkItem item;
  const std::string fallback_id =
      screen.hash ? std::string(keyOf(m))
                  : fmt::format("{}/{}/{}", config_.kafka.topic, m->partition, m->offset);
  const ParseOutcome po = parser_.parse(payloadOf(m), fallback_id, item.event);
  if (!po.ok) return finishInvalid(m, po);
  item.sample = sampler_.decide(screen, item.event);
  if (!item.sample.sampled) {
    offsets_.skip(m->partition, m->offset);
    return;
  }
  sampling_stats_.countSampled(item.event.tenant);
  item.partition = m->partition;
  item.offset = m->offset;
  offsets_.begin(m->partition, m->offset);
  enqueue(std::move(item));
}

void Pipeline::handleOtlp(const rd_kafka_message_t* m) {
  const std::string_view payload = payloadOf(m);
  if (payload.size() > config_.limits.max_event_bytes)
    return finishInvalid(
        m, ParseOutcome{false, InvalidReason::kTooLarge,
                        fmt::format("{} bytes, limits.max_event_bytes is {}", payload.size(),
                                    config_.limits.max_event_bytes)});
  const MessageRef at{m->partition, m->offset};
  const auto read = otlp_->add(
      payload, at, [this](const std::string& id) { return !sampler_.screen(id).rejected; },
      finished_);
  if (!read.ok) return finishInvalid(m, read.invalid);
  if (read.traces == 0)
    offsets_.skip(m->partition, m->offset);  // every span sampled out, late or invalid
  else
    offsets_.begin(m->partition, m->offset);  // held in otlp_->refs() for its traces
  handleFinished();
}

void Pipeline::handleFinished() {
  for (auto& f : finished_) {
    if (!f.event) {
      release(f.messages);  // counted by the source: incomplete or evicted
      continue;
    }
    WorkItem item;
    item.event = std::move(*f.event);
    item.sample = sampler_.decide(sampler_.screen(item.event.id), item.event);
    if (!item.sample.sampled) {  // a tenant or app rule below the highest rate
      release(f.messages);
      continue;
    }
    sampling_stats_.countSampled(item.event.tenant);
    item.messages = std::move(f.messages);
    enqueue(std::move(item));
  }
  finished_.clear();
}

void Pipeline::release(const std::vector<MessageRef>& messages) {
  for (const auto& m : messages)
    if (otlp_->refs().release(m)) offsets_.finish(m.partition, m.offset);
}

void Pipeline::finishDropped(const WorkItem& item) {
  if (item.messages.empty())
    offsets_.finish(item.partition, item.offset);
  else
    release(item.messages);
}

void Pipeline::enqueue(WorkItem item) {
  if (config_.limits.when_full == LimitsOptions::WhenFull::kDropNewest) {
    if (!queue_.tryPush(item)) {
      sampling_stats_.dropped_queue_full.Increment();
      finishDropped(item);  // a counted, deliberate drop
    }
    return;
  }
  if (held_.empty() && !backlogFull() && queue_.tryPush(item)) return;
  held_.push_back(std::move(item));  // judged later, in order; its offset stays pending
  if (!paused_) {
    paused_ = true;
    sampling_stats_.paused.Set(1);
    sampling_stats_.pauses.Increment();
  }
}

bool Pipeline::backlogFull() const {
  return queue_.size() >= config_.limits.queue_capacity ||
         static_cast<std::size_t>(runner_.pending()) >= pending_limit_;
}

void Pipeline::releaseHeld() {
  while (!held_.empty() && !backlogFull() && queue_.tryPush(held_.front())) held_.pop_front();
  const std::size_t half = config_.limits.queue_capacity / 2;
  if (held_.empty() && queue_.size() <= half &&
      static_cast<std::size_t>(runner_.pending()) <= pending_limit_ / 2) {
    paused_ = false;
    sampling_stats_.paused.Set(0);
  }
}

bool Pipeline::waitWhilePaused(int timeout_ms) {
  releaseHeld();
  if (!paused_) return false;
  // No consumer poll while paused: librdkafka's pre-fetch queue fills up to
  // queued.max.messages.kbytes and its fetcher stops by itself (rd_kafka_pause_partitions was
  // tried and, on librdkafka 2.0, a partition resumed right after its pause could stay without
  // a fetcher for good). One poll every max.poll.interval.ms / 4 keeps the group membership
  // and serves rebalances; the message it returns is held like the others.
  if (Clock::now() - last_poll_ >= keepalive_) {
    last_poll_ = Clock::now();
    if (rd_kafka_message_t* m = consumer_.poll(0)) {
      handleMessage(m);
      rd_kafka_message_destroy(m);
    }
    return true;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 5)));
  return true;
}

void Pipeline::finishInvalid(const rd_kafka_message_t* m, const ParseOutcome& po) {
  consumer_stats_.invalid[static_cast<int>(po.reason)]->Increment();
  long suppressed = 0;
  if (invalid_log_.allow(suppressed)) {
    const auto key = keyOf(m);
    spdlog::warn(
        "invalid message at topic {} partition {} offset {}{}: {}: {}{}", config_.kafka.topic,
        m->partition, m->offset, key.empty() ? "" : fmt::format(" (key '{}')", logText(key, 64)),
        invalidReasonName(po.reason), logText(po.detail), RateLimitedLog::note(suppressed));
  }
  // A backfill reads messages the daemon already consumed, and dead-lettered then: not again.
  if (!config_.kafka.dead_letter_topic.empty() && !run_.backfill) {
    const KafkaProducer::Source source{m->rkt ? rd_kafka_topic_name(m->rkt) : "", m->partition,
                                       m->offset};
    producer_.produceDeadLetter(config_.kafka.dead_letter_topic, m->payload, m->len, m->key,
                                m->key_len, invalidReasonName(po.reason), source,
                                consumer_stats_.dead_lettered, consumer_stats_.dead_letter_errors);
  }
  offsets_.skip(m->partition, m->offset);
}

void Pipeline::handleFeedback(const rd_kafka_message_t* m) {
  std::string error, kind;
  if (auto f = parseFeedback(payloadOf(m), keyOf(m), error, kind)) {
    f->partition = m->partition;
    tracker_.onFeedback(*f);
  } else {
    tracker_.countInvalidFeedback(kind);
    long suppressed = 0;
    if (feedback_log_.allow(suppressed))
      spdlog::warn("invalid feedback at topic {} partition {} offset {}: {}{}",
                   config_.kafka.feedback_topic, m->partition, m->offset, logText(error),
                   RateLimitedLog::note(suppressed));
  }
  feedback_offsets_.skip(m->partition, m->offset);
}

std::string Pipeline::notReady() const {
  if (const auto at = auth_failed_at_ns_.load(); at && steadyNs() - at < 60'000'000'000)
    return "Kafka authentication failed in the last minute (kafka.properties sasl.* / ssl.*)";
  if (brokers_down_) return "no Kafka broker answers (kafka.brokers: " + bootstrap_ + ")";
  if (!assigned_) return "waiting for the Kafka partition assignment (joining the consumer group)";
  if (!store_ready_) return "the budget store (budget.store) does not answer";
  return "";
}

std::string Pipeline::unhealthy() const {
  std::lock_guard lock(stalled_mu_);
  return stalled_why_;
}

void Pipeline::checkStalls() {
  // One entry per judge name (a reload's replaced set may still have runs of the same judge).
  std::map<std::string, JudgeRunner::Silence> by_name;
  for (auto& s : runner_.silences()) {
    auto [it, added] = by_name.try_emplace(s.judge, s);
    if (!added && (s.stalled || s.silent_seconds > it->second.silent_seconds)) it->second = s;
  }
  std::string why;
  std::set<std::string> now_stalled;
  for (const auto& [name, s] : by_name) {
    s.stats->stalled->Set(s.stalled ? 1 : 0);
    if (!s.stalled) {
      if (stalled_judges_.count(name)) spdlog::info("judge '{}' delivers verdicts again", name);
      continue;
    }
    now_stalled.insert(name);
    if (!stalled_judges_.count(name))
      spdlog::error(
          "judge '{}' is stalled: {} runs outstanding and no verdict for {:.0f} s (it may take "
          "{:.0f} s when it works); /healthz says 503 until it delivers one",
          name, s.outstanding, s.silent_seconds, s.limit_seconds);
    why +=
        fmt::format("{}judge '{}' has delivered no verdict for {:.0f} s with {} runs outstanding",
                    why.empty() ? "" : "; ", name, s.silent_seconds, s.outstanding);
  }
  stalled_judges_ = std::move(now_stalled);
  std::lock_guard lock(stalled_mu_);
  stalled_why_ = std::move(why);
}

void Pipeline::reloadConfig() {
  const auto count = [this](const char* result) {
    reloads_->Add({{"result", result}}).Increment();
    const bool rejected = std::string_view(result) == "rejected";
    reload_ok_->Set(rejected ? 0 : 1);
    if (!rejected) restart_needed_->Set(std::string_view(result) == "restart_needed" ? 1 : 0);
  };
  std::string text;
  const auto unreadable = readYamlFile(config_.file, text);
  LoadResult res = unreadable ? LoadResult{} : loadConfigString(text, config_.file);
  if (unreadable) res.errors.push_back({config_.file, 0, 0, "", unreadable->message});
  for (auto& e : res.service_errors) res.errors.push_back(std::move(e));
  if (res.errors.empty())
    for (auto& e : startupErrors(res.config)) res.errors.push_back(std::move(e));
  std::stable_sort(res.errors.begin(), res.errors.end(), [](const auto& a, const auto& b) {
    return std::pair(a.line > 0 ? a.line : INT_MAX, a.column) <
           std::pair(b.line > 0 ? b.line : INT_MAX, b.column);
  });
  if (!res.errors.empty()) {
    spdlog::error("SIGHUP: {} rejected ({} error(s)); the running configuration stays:",
                  config_.file, res.errors.size());
    for (const auto& e : res.errors) spdlog::error("  {}", e.format());
    return count("rejected");
  }
  // What applies live is compared with the file as last applied (a part applied by an earlier
  // reload is not applied again); what needs a restart with the file assayd started with.
  const ReloadDiff diff = diffConfigs(applied_text_, text);
  const std::vector<std::string> restart = diffConfigs(start_text_, text).restart;
  if ((diff.judges || diff.budget_cap) && !rebuildJudges(std::move(res.config), diff))
    return count("rejected");
  const Config& applied = (diff.judges || diff.budget_cap) ? *reloaded_.back() : res.config;
  if (diff.judges) parser_.setExtra(applied.events.extra);  // the new judges' pointer inputs
  if (diff.sampling) {
    sampler_ = Sampler(applied.sampling.rate, applied.sampling.rules);
    spdlog::info("SIGHUP: sampling applied (rate {}, {} rule(s))", applied.sampling.rate,
                 applied.sampling.rules.size());
  }
  if (!diff.judges && !diff.budget_cap)
    for (const std::size_t i : diff.judge_rates) {
      runner_.setRate(i, applied.judges[i].rate);
      spdlog::info("SIGHUP: judge '{}' rate {} applied", applied.judges[i].name,
                   applied.judges[i].rate);
    }
  if (diff.log) {
    spdlog::set_level(spdlog::level::from_str(applied.log.level));
    spdlog::set_formatter(logFormatter(applied.log.format, stderrIsJournal()));
    spdlog::info("SIGHUP: log level {} and format {} applied", applied.log.level,
                 applied.log.format);
  }
  applied_text_ = text;
  if (restart.empty()) {
    if (diff.empty()) spdlog::info("SIGHUP: {} unchanged", config_.file);
    return count("applied");
  }
  std::string what;
  for (const auto& r : restart) what += (what.empty() ? "" : ", ") + r;
  spdlog::warn(
      "SIGHUP: {} changed {}: a reload does not apply that; restart assayd for it (what "
      "could be applied was)",
      config_.file, what);
  count("restart_needed");
}

bool Pipeline::rebuildJudges(Config&& config, const ReloadDiff& diff) {
  auto owned = std::make_unique<Config>(std::move(config));
  std::vector<RunnableJudge> judges;
  try {
    judges = buildJudges(*owned, services_);
  } catch (const std::exception& e) {  // e.g. an API key variable the service does not have
    spdlog::error("SIGHUP: {} rejected: {}; the running configuration stays", config_.file,
                  e.what());
    return false;
  }
  const auto tracked = tracker_.setJudges(trackedJudges(*owned));
  for (std::size_t i = 0; i < judges.size(); ++i) judges[i].tracked = tracked[i];
  std::string names, changed;
  for (const auto& j : judges) names += (names.empty() ? "" : ", ") + j.name;
  for (const auto& c : diff.changed_judges) changed += (changed.empty() ? "" : ", ") + c;
  runner_.replaceJudges(std::move(judges));
  reloaded_.push_back(std::move(owned));
  spdlog::info(
      "SIGHUP: judges rebuilt ({}{}{}): {}; global cap €{}/day; events already being judged "
      "finish with the previous judges",
      changed, !changed.empty() && diff.budget_cap ? ", " : "",
      diff.budget_cap ? "budget.daily_limit_eur" : "", names.empty() ? "none" : names,
      reloaded_.back()->budget.daily_limit_eur);
  return true;
}

void Pipeline::everySecond() {
  services_.refresh();  // queued on the ledger's thread: never waits for Redis here
  if (otlp_) otlp_->refresh();
  store_ready_ = services_.ready();
  if (brokers_down_ && consumer_.brokerAnswers(200)) {
    brokers_down_ = false;
    consumer_stats_.brokers_reachable.Set(1);
    if (last_activity_) last_activity_ = Clock::now();  // the idle timer restarts
    spdlog::info("kafka: a broker answers again");
  }
  judge_stats_.pending.Set(static_cast<double>(runner_.pending()));
  checkStalls();
  process_stats_.refresh();
  notifyService();
  tracker_.refresh();
  consumer_stats_.setLag(consumer_.lag());
  checkCopartition();
  const auto now = Clock::now();
  const auto topics = topicsOf(config_.kafka);
  for (std::size_t i = 0; i < topics.size(); ++i)
    consumer_stats_.setTopic(i, std::chrono::duration<double>(now - last_message_[i]).count(),
                             consumer_.assignedPartitions(topics[i]));
  last_refresh_ = now;
}

namespace {
std::string partitionList(const std::vector<std::int32_t>& v) {
  std::string out;
  for (const auto p : v) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return "[" + out + "]";
}
}  // namespace

void Pipeline::checkCopartition() {
  if (config_.kafka.feedback_topic.empty() || run_.backfill) return;
  const std::uint64_t n = consumer_.rebalances();
  const auto now = Clock::now();
  if (n != copartition_seen_) {  // wait for the assignment to settle (a cooperative rebalance
    copartition_seen_ = n;       // revokes, then assigns, in separate steps)
    copartition_changed_at_ = now;
    return;
  }
  if (n == copartition_checked_ || now - copartition_changed_at_ < std::chrono::seconds(10)) return;
  const auto events = consumer_.assignedOf(config_.kafka.topic);
  const auto feedback = consumer_.assignedOf(config_.kafka.feedback_topic);
  if (events.empty()) return;  // nothing judged here, nothing to join
  const int ne = consumer_.partitionCount(config_.kafka.topic, 2000);
  const int nf = consumer_.partitionCount(config_.kafka.feedback_topic, 2000);
  if (ne < 0 || nf < 0) return;  // no metadata now: the next refresh asks again
  copartition_checked_ = n;
  const bool everything =
      static_cast<int>(events.size()) == ne && static_cast<int>(feedback.size()) == nf;
  const bool ok = everything || (ne == nf && events == feedback);
  const bool first = !copartition_known_, was = consumer_stats_.feedback_copartitioned.Value() == 1;
  copartition_known_ = true;
  consumer_stats_.feedback_copartitioned.Set(ok ? 1 : 0);
  if (ok && (first || !was))
    spdlog::info(
        "kafka: feedback co-partitioned{}: events partitions {} of {}, feedback "
        "partitions {} of {}",
        first ? "" : " again", partitionList(events), ne, partitionList(feedback), nf);
  if (ok) return;
  spdlog::warn(
      "kafka: feedback is not co-partitioned with the events on this instance: it consumes "
      "events partitions {} of {} and feedback partitions {} of {}; ratings and annotations of "
      "the events judged here reach other instances and are never joined (counted unmatched "
      "there). Feedback is joined on the instance that judged its event: give both topics the "
      "same partition count, key feedback by the event id with the events' partitioner, and set "
      "kafka.properties partition.assignment.strategy: range (it gives partition p of both "
      "topics to one instance; cooperative-sticky and roundrobin do not)",
      partitionList(events), ne, partitionList(feedback), nf);
}

void Pipeline::notifyService() {
  if (!service::supervised()) return;
  const auto now = Clock::now();
  const bool first = !ready_notified_ && store_ready_;
  if (!first && now - status_at_ < std::chrono::seconds(5)) return;
  const double consumed = consumer_stats_.consumed.Value(), judged = sink_stats_.judged.Value();
  const double s = std::chrono::duration<double>(now - status_at_).count();
  const std::string why = notReady();
  const std::string line =
      fmt::format("consumed {:.1f}/s, judged {:.1f}/s ({:.0f} and {:.0f} in all); {}",
                  status_at_ == Clock::time_point{} ? 0.0 : (consumed - status_consumed_) / s,
                  status_at_ == Clock::time_point{} ? 0.0 : (judged - status_judged_) / s, consumed,
                  judged, why.empty() ? "ready" : "not ready: " + why);
  status_at_ = now;
  status_consumed_ = consumed;
  status_judged_ = judged;
  if (first || ready_notified_) {  // READY once the store answers; STATUS= from then on
    ready_notified_ = true;
    service::ready(line);
  } else {
    service::status(line);
  }
}

bool Pipeline::idle() const {
  return last_activity_ && !brokers_down_ && held_.empty() && queue_.size() == 0 &&
         runner_.busy() == 0 && runner_.pending() == 0 && offsets_.pending() == 0 &&
         feedback_offsets_.pending() == 0 &&
         Clock::now() - *last_activity_ >= std::chrono::duration<double>(*run_.exit_when_idle_s);
}

std::vector<KafkaConsumer::Range> Pipeline::planBackfill(std::int64_t from_ms, std::int64_t to_ms) {
  return consumer_.offsetsBetween(from_ms, to_ms);
}

void Pipeline::startBackfill(const std::vector<KafkaConsumer::Range>& ranges) {
  for (const auto& r : ranges) {
    if (r.to <= r.from) continue;
    backfill_ranges_[r.partition] = {r.from, r.to};
    backfill_next_[r.partition] = r.from;
    backfill_total_ += r.to - r.from;
  }
  backfill_started_ = true;
  consumer_.assignRanges(ranges);
  last_activity_ = Clock::now();
}

bool Pipeline::backfillDone() const {
  if (!backfill_started_) return false;
  for (const auto& [partition, range] : backfill_ranges_)
    if (backfill_next_.at(partition) < range.second) return false;
  return held_.empty() && queue_.size() == 0 && runner_.busy() == 0 && runner_.pending() == 0 &&
         offsets_.pending() == 0 && (!otlp_ || otlp_->join().traces() == 0);
}

std::pair<std::int64_t, std::int64_t> Pipeline::backfillProgress() const {
  return {backfill_read_, backfill_total_};
}

std::size_t Pipeline::judgeQueued() {
  std::size_t n = 0;
  while (auto item = queue_.tryPop()) {
    runner_.run(*item);
    ++n;
  }
  return n;
}

// ---- Start and stop ---------------------------------------------------------------------------

void Pipeline::replay() {
  if (!run_.replay_file.empty()) {
    const auto t0 = Clock::now();
    const auto n =
        otlp_ ? producer_.replay(
                    run_.replay_file, config_.kafka.topic,
                    [](const std::string& line) {
                      // Keyed by the trace id when the line holds one trace, as the Collector's
                      // exporter keys by trace id with partition_traces_by_id.
                      otlp::Batch b;
                      std::string error;
                      if (!otlp::decodeJson(line, b, error) || b.spans.empty())
                        return std::string();
                      for (const auto& s : b.spans)
                        if (s.trace_id != b.spans[0].trace_id) return std::string();
                      return otlp::hex(b.spans[0].trace_id.data(), 16);
                    },
                    "--replay",
                    config_.kafka.format == EventFormat::kOtlpProto
                        ? std::function<bool(const std::string&, std::string&, std::string&)>(
                              [](const std::string& line, std::string& value, std::string& error) {
                                return otlp::jsonToProto(line, value, error);
                              })
                        : nullptr)
              : producer_.replay(run_.replay_file, config_.kafka.topic, parser_);
    spdlog::info("replay: produced {} message(s) from '{}' into '{}' in {:.2f} s", n,
                 run_.replay_file, config_.kafka.topic,
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (!run_.replay_feedback_file.empty()) {
    const auto n = producer_.replay(
        run_.replay_feedback_file, config_.kafka.feedback_topic,
        [](const std::string& line) {
          std::string error, kind;
          const auto f = parseFeedback(line, "", error, kind);
          return f ? f->id : std::string();  // an invalid line is produced unkeyed and counted
        },
        "--replay-feedback");
    spdlog::info("replay: produced {} feedback message(s) from '{}' into '{}'", n,
                 run_.replay_feedback_file, config_.kafka.feedback_topic);
  }
}

/// Stop polling (done) → let the queue and the asynchronous verdicts drain within
/// limits.drain_timeout_ms → drop what is left (counted, not committed: redelivered) → join the
/// workers and stop the judges' services → flush the sinks → commit.
void Pipeline::shutdown() {
  service::stopping();
  for (RateLimitedLog* log : {&feedback_log_, &invalid_log_})
    if (const long n = log->pendingSuppressed())
      spdlog::warn("{} more {} log line(s) were suppressed (every one is counted in {})", n,
                   log == &invalid_log_ ? "invalid-message" : "invalid-feedback",
                   log == &invalid_log_ ? "assay_events_invalid_total"
                                        : "assay_feedback_events_total{outcome=\"invalid\"}");
  queue_.close();
  const auto deadline = Clock::now() + std::chrono::milliseconds(config_.limits.drain_timeout_ms);
  while ((queue_.size() > 0 || runner_.busy() > 0 || runner_.pending() > 0) &&
         Clock::now() < deadline) {
    if (run_.no_workers) judgeQueued();
    producer_.poll();
    service::watchdog();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (const auto left = queue_.takeAll().size() + held_.size(); left > 0) {
    held_.clear();
    sampling_stats_.dropped_shutdown.Increment(static_cast<double>(left));
    spdlog::warn(
        "shutdown: {} sampled event(s) not judged within drain_timeout_ms; their offsets are "
        "not committed, so they are redelivered",
        left);
  }
  runner_.join();
  if (const int n = runner_.pending(); n > 0)
    spdlog::warn(
        "shutdown: {} event(s) still wait for an asynchronous verdict after drain_timeout_ms; "
        "they are not committed and will be judged again",
        n);
  services_.stop();    // abandons calls still running; records the settlements queued
  tracker_.refresh();  // the last scrape shows the final statistics
  sinks_.flush();
  if (const int n = producer_.outstanding(); n > 0)
    spdlog::info("shutdown: waiting up to 10 s for the broker to acknowledge {} message(s)", n);
  producer_.flush(10000);
  if (const int n = producer_.outstanding(); n > 0)
    spdlog::warn("shutdown: {} message(s) to the results or dead-letter topic not acknowledged", n);
  if (!consumer_.close() && exit_code_ == 0) exit_code_ = 3;
  sampling_stats_.queue_depth.Set(0);
  logSummary();
}

void Pipeline::logSummary() const {
  const auto value = [](const prometheus::Counter& c) { return static_cast<long>(c.Value()); };
  const auto [invalid, detail] = consumer_stats_.invalidSummary();
  const long judged = value(sink_stats_.judged);
  spdlog::info("stopped: consumed {}, sampled {}, invalid {}{}{}{}, judged {}, dropped {}",
               value(consumer_stats_.consumed), static_cast<long>(sampling_stats_.sampledTotal()),
               invalid, detail.empty() ? "" : " (", detail, detail.empty() ? "" : ")", judged,
               value(sampling_stats_.dropped_queue_full) + value(sampling_stats_.dropped_shutdown));
  if (const long pauses = value(sampling_stats_.pauses); pauses > 0)
    spdlog::info("back-pressure: consumption paused {} time(s) while the judge backlog was full",
                 pauses);
  const auto assigned_at = consumer_.firstAssignedAt();
  const long consumed = value(consumer_stats_.consumed);
  if (assigned_at != Clock::time_point{} && consumed > 0 && last_message_[0] > assigned_at) {
    const double s = std::chrono::duration<double>(last_message_[0] - assigned_at).count();
    spdlog::info(
        "consumption: {} messages in {:.3f} s from the first partition assignment to the last "
        "message ({:.0f} messages/s)",
        consumed, s, static_cast<double>(consumed) / s);
  }
  const auto first_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(first_consumed_.time_since_epoch())
          .count();
  const double busy_s = static_cast<double>(last_judged_ns_.load() - first_ns) / 1e9;
  if (first_consumed_ != Clock::time_point{} && busy_s > 0)
    spdlog::info(
        "throughput: {} events judged in {:.3f} s from first message to last judgment "
        "({:.0f} events/s)",
        judged, busy_s, static_cast<double>(judged) / busy_s);
}

}  // namespace assay
