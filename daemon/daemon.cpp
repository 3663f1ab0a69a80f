#include "daemon/daemon.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "config/loader.hpp"
#include "config/rfc3339.hpp"
#include "daemon/admin_server.hpp"
#include "daemon/event_parser.hpp"
#include "daemon/kafka.hpp"
#include "daemon/llm_stage.hpp"
#include "daemon/offset_tracker.hpp"
#include "daemon/version.hpp"
#include "sampling/bounded_queue.hpp"
#include "sampling/sampler.hpp"
#include "sinks/judgment.hpp"
#include "sinks/metrics.hpp"
#include "sinks/registry.hpp"
#include "judges/tracking/tracker.hpp"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};

/// A sampled event on its way to the judges.
struct WorkItem {
  Event event;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::uint64_t hash = 0;
  double rate = 1.0;  ///< the event's sampling rate (for nested per-judge rates)
};

/// A configured judge, ready to run (an LLM judge has no `judge`: the LlmStage runs it).
struct ActiveJudge {
  std::string name;
  std::string criterion;
  double min_score, max_score;
  double rate;
  std::unique_ptr<Judge> judge;
  const std::vector<RunIfCondition>* run_if;
  bool llm = false;
  bool graded = true;  ///< false for pass/fail checks (no leniency verdict)
};

/// Whether every run_if condition holds on the verdicts already produced for this event.
bool runIfHolds(const std::vector<RunIfCondition>& conditions,
                const std::vector<std::optional<JudgedVerdict>>& slots,
                const std::vector<ActiveJudge>& judges) {
  for (const auto& c : conditions) {
    const JudgedVerdict* v = nullptr;
    for (std::size_t i = 0; i < judges.size(); ++i)
      if (judges[i].name == c.judge && slots[i]) v = &*slots[i];
    if (!v || !v->verdict.score) return false;
    const double score = *v->verdict.score;
    if (c.below && !(score < *c.below)) return false;
    if (c.above && !(score > *c.above)) return false;
    if (c.passed && v->verdict.passed != c.passed) return false;
  }
  return true;
}

/// An event whose LLM verdicts are still on their way; the last one to arrive writes it.
struct PendingJudgment {
  Judgment judgment;                                // id, tenant… (verdicts filled at the end)
  std::vector<std::optional<JudgedVerdict>> slots;  // one per configured judge, config order
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::mutex mu;
  int remaining = 0;
};

std::int64_t nowEpochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Allows at most 5 log lines per minute for one kind of data-path failure; the first line of
/// the next minute says how many were suppressed (every one is counted in a metric anyway).
class RateLimitedLog {
 public:
  /// True when the caller may log; `suppressed` is then the number held back since.
  bool allow(long& suppressed) {
    const auto now = Clock::now();
    std::lock_guard lock(mu_);
    if (now - window_start_ > std::chrono::minutes(1)) window_start_ = now, count_ = 0;
    if (++count_ > 5) {
      ++suppressed_;
      return false;
    }
    suppressed = std::exchange(suppressed_, 0);
    return true;
  }
  /// Held back since the last line that was logged.
  long pendingSuppressed() {
    std::lock_guard lock(mu_);
    return suppressed_;
  }

 private:
  std::mutex mu_;
  Clock::time_point window_start_ = Clock::now();
  int count_ = 0;
  long suppressed_ = 0;
};

std::string suppressedNote(long n) {
  return n ? fmt::format(" ({} similar message(s) suppressed before this one)", n) : "";
}

}  // namespace

void requestStop() { g_stop.store(true); }

int runDaemon(const Config& config, const RunOptions& run) {
  g_stop = false;
  // ---- Construction, in dependency order. Members destroyed in reverse: sinks and the
  // ---- consumer go before the producer, the producer before the embedded broker.
  std::vector<ActiveJudge> judges;
  std::vector<JudgeMetricSpec> judge_specs;
  for (const auto& jc : config.judges) {
    if (jc.llm) {
      judges.push_back(
          {jc.name, jc.llm_options.criterion, 1, 4, jc.rate, nullptr, &jc.run_if, true});
      judge_specs.push_back({jc.name, jc.llm_options.criterion, {1, 2, 3, 4}, true});
      continue;
    }
    const auto* d = jc.factory->descriptor;
    judges.push_back({jc.name, std::string(d->criterion), d->min_score, d->max_score, jc.rate,
                      jc.factory->create(jc.values), &jc.run_if, false,
                      d->kind != JudgeKind::kCheck});
    judge_specs.push_back({jc.name, std::string(d->criterion), d->buckets});
  }
  Metrics metrics(config.kafka.topic, judge_specs,
                  static_cast<std::size_t>(config.tracking.max_label_values), kAssayVersion);
  std::vector<TrackedJudge> tracked;
  for (const auto& aj : judges)
    tracked.push_back({aj.name, aj.criterion, aj.min_score, aj.max_score, aj.graded});
  ScoreTracker tracker_scores(tracked, config.tracking, metrics.registry());
  if (!config.tracking.baseline_file.empty()) {
    const auto& t = config.tracking;
    std::map<std::string, std::vector<double>> baseline;
    try {
      baseline = loadBaselineScores(
          t.baseline_file, t.baseline_from.empty() ? std::nullopt : parseRfc3339(t.baseline_from),
          t.baseline_until.empty() ? std::nullopt : parseRfc3339(t.baseline_until));
    } catch (const std::runtime_error& e) {
      throw ConfigurationError(std::string("tracking.baseline_file: ") + e.what());
    }
    const std::string range =
        t.baseline_from.empty() && t.baseline_until.empty()
            ? ""
            : fmt::format(" judged in [{}, {})", t.baseline_from.empty() ? "…" : t.baseline_from,
                          t.baseline_until.empty() ? "…" : t.baseline_until);
    for (std::size_t i = 0; i < tracked.size(); ++i) {
      auto it = baseline.find(tracked[i].name);
      if (it == baseline.end() || it->second.size() < 2) {
        spdlog::warn(
            "tracking: baseline file '{}' has {} score(s) of judge '{}'{}: its baseline is "
            "taken from its first scores instead",
            t.baseline_file, it == baseline.end() ? 0 : it->second.size(), tracked[i].name, range);
        continue;
      }
      auto scores = it->second;
      // A count window keeps the file's last baseline_window scores; a duration window all of
      // them (baseline_from/until choose the period).
      if (t.baseline_seconds <= 0 && scores.size() > static_cast<std::size_t>(t.baseline_window))
        scores.erase(scores.begin(), scores.end() - t.baseline_window);
      spdlog::info("tracking: judge '{}' drift baseline frozen from '{}'{} ({} scores)",
                   tracked[i].name, t.baseline_file, range, scores.size());
      tracker_scores.setBaseline(i, std::move(scores));
    }
  }
  OffsetTracker tracker, feedback_tracker;
  auto& lag_family = prometheus::BuildGauge()
                         .Name("assay_consumer_lag_messages")
                         .Help(
                             "Messages not yet consumed per assigned partition (high "
                             "watermark minus position)")
                         .Register(metrics.registry());
  std::map<std::pair<std::string, std::int32_t>, prometheus::Gauge*> lag_gauges;
  std::atomic<bool> consumer_ready{false};
  // Its HTTP threads are stopped explicitly at shutdown (llm.stop()), before the sinks and the
  // callbacks' lambdas below are destroyed; abandoned calls never reach them.
  LlmStage llm(config, metrics);
  AdminServer admin(config.admin.listen, {[&] { return metrics.serialize(); },
                                          [&] { return consumer_ready.load() && llm.ready(); }});
  spdlog::info("admin: http://{}:{}/metrics, /healthz, /readyz",
               config.admin.listen.substr(0, config.admin.listen.rfind(':')), admin.port());

  std::unique_ptr<EmbeddedBroker> broker;
  std::string bootstrap = config.kafka.brokers;
  if (bootstrap == "embedded") {
    broker = std::make_unique<EmbeddedBroker>(
        config.kafka.partitions,
        std::vector<std::string>{config.kafka.topic, config.kafka.results_topic,
                                 config.kafka.dead_letter_topic, config.kafka.feedback_topic});
    bootstrap = broker->bootstrapServers();
    spdlog::info(
        "kafka: embedded broker (librdkafka mock cluster) at {}, topic '{}' with {} partitions",
        bootstrap, config.kafka.topic, config.kafka.partitions);
  }
  KafkaProducer producer(config.kafka, bootstrap);
  EventParser parser(config.events, config.limits.max_event_bytes);

  if (!run.replay_file.empty()) {
    const auto t0 = Clock::now();
    const auto n = producer.replay(run.replay_file, config.kafka.topic, parser);
    spdlog::info("replay: produced {} message(s) from '{}' into '{}' in {:.2f} s", n,
                 run.replay_file, config.kafka.topic,
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }

  if (!run.replay_feedback_file.empty()) {
    if (config.kafka.feedback_topic.empty())
      throw ConfigurationError("--replay-feedback needs kafka.feedback_topic in the configuration");
    const auto n = producer.replay(
        run.replay_feedback_file, config.kafka.feedback_topic,
        [](const std::string& line) {
          std::string error, kind;
          const auto f = parseFeedback(line, "", error, kind);
          return f ? f->id : std::string();  // an invalid line is produced unkeyed and counted
        },
        "--replay-feedback");
    spdlog::info("replay: produced {} feedback message(s) from '{}' into '{}'", n,
                 run.replay_feedback_file, config.kafka.feedback_topic);
  }

  SinkContext sink_ctx{&metrics, producer.handle(), config.kafka.results_topic};
  auto sinks = createSinks(config.sinks, sink_ctx);
  if (sinks.empty()) spdlog::warn("no sink configured: judgments go to the metrics only");

  Sampler sampler(config.sampling.rate, config.sampling.rules);
  BoundedQueue<WorkItem> queue(config.limits.queue_capacity);

  // ---- Judge workers: run every judge whose nested rate admits the event, then hand the
  // ---- judgment to every sink; the event's offset is finished when the last sink lets go.
  std::atomic<int> busy_workers{0};
  // Throughput: from the first consumed message to the last judged event (steady clock, ns).
  std::atomic<std::int64_t> first_consumed_ns{0}, last_judged_ns{0};
  const auto steadyNs = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  };
  // Writes a finished judgment to every sink; the event's offset is finished when the last
  // sink lets go of the token.
  auto deliver = [&](Judgment& j, std::vector<std::optional<JudgedVerdict>>& slots,
                     std::int32_t partition, std::int64_t offset) {
    for (auto& s : slots)
      if (s) j.verdicts.push_back(std::move(*s));
    const std::string json = toJson(j);
    DeliveryToken token(
        nullptr, [&tracker, partition, offset](void*) { tracker.finish(partition, offset); });
    for (auto& sink : sinks) sink->write(j, json, token);
    token.reset();
    metrics.judged.Increment();
    last_judged_ns = steadyNs();
  };
  auto record = [&](std::size_t i, const std::string& id, const std::string& variant, Verdict v,
                    double secs) {
    auto& stats = metrics.judge[i];
    metrics.countRun(i, v.outcome);
    stats.latency->Observe(secs);
    if (v.outcome == Outcome::kOk && v.score) {
      stats.score->Observe(*v.score);
      tracker_scores.record(i, id, variant, *v.score);
    }
    const auto& aj = judges[i];
    return JudgedVerdict{aj.name,      aj.criterion, std::move(v),
                         aj.min_score, aj.max_score, secs * 1000.0};
  };
  auto worker = [&] {
    while (auto item = queue.pop()) {
      ++busy_workers;
      metrics.queue_depth.Set(static_cast<double>(queue.size()));
      auto pending = std::make_shared<PendingJudgment>();
      pending->judgment = Judgment{item->event.id,      item->event.tenant, item->event.app,
                                   item->event.variant, nowEpochMs(),       {}};
      pending->slots.resize(judges.size());
      pending->partition = item->partition;
      pending->offset = item->offset;
      tracker_scores.noteEvent(item->event.id, item->event.variant, item->event.app);
      const std::string& id = pending->judgment.id;
      const std::string& variant = pending->judgment.variant;
      std::vector<std::size_t> llm_to_run;
      // Cheap judges in config order, then the LLM judges (their run_if sees every cheap verdict).
      for (std::size_t i = 0; i < judges.size(); ++i) {
        const auto& aj = judges[i];
        if (!Sampler::judgeRuns(item->hash, item->rate, aj.rate)) continue;
        if (aj.llm) {
          llm_to_run.push_back(i);
          continue;
        }
        if (!runIfHolds(*aj.run_if, pending->slots, judges)) continue;
        const auto t0 = Clock::now();
        Verdict v = aj.judge->judge(item->event);
        pending->slots[i] = record(i, id, variant, std::move(v),
                                   std::chrono::duration<double>(Clock::now() - t0).count());
      }
      std::erase_if(llm_to_run, [&](std::size_t i) {
        return !runIfHolds(*judges[i].run_if, pending->slots, judges);
      });
      if (llm_to_run.empty()) {
        deliver(pending->judgment, pending->slots, pending->partition, pending->offset);
      } else {
        pending->remaining = static_cast<int>(llm_to_run.size());
        for (std::size_t i : llm_to_run) {
          llm.judge(i, item->event, [&, pending, i](Verdict v, double secs) {
            auto jv =
                record(i, pending->judgment.id, pending->judgment.variant, std::move(v), secs);
            std::lock_guard lock(pending->mu);
            pending->slots[i] = std::move(jv);
            if (--pending->remaining == 0)
              deliver(pending->judgment, pending->slots, pending->partition, pending->offset);
          });
        }
      }
      --busy_workers;
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < config.limits.workers; ++i) workers.emplace_back(worker);

  // ---- The Kafka poll thread (this one): parse-free sampling when the key carries the id.
  KafkaConsumer consumer(config.kafka, bootstrap, tracker, &feedback_tracker);
  if (!config.kafka.feedback_topic.empty())
    spdlog::info("kafka: feedback from '{}' (ratings and annotations, joined by id)",
                 config.kafka.feedback_topic);
  RateLimitedLog feedback_log;
  auto onFeedback = [&](const rd_kafka_message_t* m) {
    const std::string_view payload(static_cast<const char*>(m->payload), m->len);
    const std::string_view key(static_cast<const char*>(m->key), m->key ? m->key_len : 0);
    std::string error, kind;
    if (const auto f = parseFeedback(payload, key, error, kind)) {
      tracker_scores.onFeedback(*f);
    } else {
      tracker_scores.countInvalidFeedback(kind);
      long suppressed = 0;
      if (feedback_log.allow(suppressed))
        spdlog::warn("invalid feedback at topic {} partition {} offset {}: {}{}",
                     config.kafka.feedback_topic, m->partition, m->offset, error,
                     suppressedNote(suppressed));
    }
    feedback_tracker.skip(m->partition, m->offset);
  };
  auto refreshLag = [&] {
    std::map<std::pair<std::string, std::int32_t>, prometheus::Gauge*> now;
    for (const auto& l : consumer.lag()) {
      const auto k = std::make_pair(l.topic, l.partition);
      auto it = lag_gauges.find(k);
      prometheus::Gauge* g =
          it != lag_gauges.end()
              ? it->second
              : &lag_family.Add({{"topic", l.topic}, {"partition", std::to_string(l.partition)}});
      g->Set(static_cast<double>(l.messages));
      now[k] = g;
      if (it != lag_gauges.end()) lag_gauges.erase(it);
    }
    for (auto& [k, g] : lag_gauges) lag_family.Remove(g);  // partitions no longer assigned
    lag_gauges = std::move(now);
  };
  RateLimitedLog invalid_log, kafka_log;
  std::optional<Clock::time_point> last_activity;  // starts at the first assignment
  Clock::time_point last_budget_refresh{};
  const auto& topic = config.kafka.topic;
  int exit_code = 0;

  auto finishInvalid = [&](const rd_kafka_message_t* m, const ParseOutcome& po) {
    metrics.invalid[static_cast<int>(po.reason)]->Increment();
    long suppressed = 0;
    if (invalid_log.allow(suppressed))
      spdlog::warn("invalid message at topic {} partition {} offset {}{}: {}: {}{}", topic,
                   m->partition, m->offset,
                   m->key ? fmt::format(" (key '{}')",
                                        std::string_view(static_cast<const char*>(m->key),
                                                         std::min<std::size_t>(m->key_len, 64)))
                          : "",
                   invalidReasonName(po.reason), po.detail, suppressedNote(suppressed));
    if (!config.kafka.dead_letter_topic.empty()) {
      if (producer.produceDeadLetter(config.kafka.dead_letter_topic, m->payload, m->len, m->key,
                                     m->key_len, invalidReasonName(po.reason)))
        metrics.dead_lettered.Increment();
    }
    tracker.skip(m->partition, m->offset);
  };

  while (!g_stop.load()) {
    rd_kafka_message_t* m = consumer.poll(100);
    producer.poll();
    if (consumer.assigned() && !consumer_ready) {
      consumer_ready = true;
      last_activity = Clock::now();
    }
    if (m) {
      if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
        spdlog::critical("kafka: fatal consumer error: {}; stopping", rd_kafka_message_errstr(m));
        exit_code = 1;
        rd_kafka_message_destroy(m);
        break;
      } else if (m->err) {
        long suppressed = 0;
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && kafka_log.allow(suppressed))
          spdlog::warn("kafka: {}{}", rd_kafka_message_errstr(m), suppressedNote(suppressed));
      } else if (consumer.isFeedback(m)) {
        last_activity = Clock::now();
        onFeedback(m);
      } else {
        last_activity = Clock::now();
        if (first_consumed_ns == 0) first_consumed_ns = steadyNs();
        metrics.consumed.Increment();
        const std::string_view payload(static_cast<const char*>(m->payload), m->len);
        const std::string_view key(static_cast<const char*>(m->key), m->key ? m->key_len : 0);
        const std::uint64_t key_hash = key.empty() ? 0 : sampleHash(key);
        if (!key.empty() && !sampler.maybeSampled(key_hash)) {
          tracker.skip(m->partition, m->offset);  // not sampled whatever it holds: never parsed
        } else {
          WorkItem item;
          const std::string fallback = key.empty() ? topic + "/" + std::to_string(m->partition) +
                                                         "/" + std::to_string(m->offset)
                                                   : std::string(key);
          const ParseOutcome po = parser.parse(payload, fallback, item.event);
          if (!po.ok) {
            finishInvalid(m, po);
          } else {
            item.hash = key.empty() ? sampleHash(item.event.id) : key_hash;
            item.rate = sampler.rateFor(item.event.tenant, item.event.app);
            if (!thresholdFor(item.rate).admits(item.hash)) {
              tracker.skip(m->partition, m->offset);
            } else {
              metrics.countSampled(item.event.tenant);
              item.partition = m->partition;
              item.offset = m->offset;
              tracker.begin(m->partition, m->offset);
              if (!queue.tryPush(item)) {
                metrics.dropped_queue_full.Increment();
                tracker.finish(m->partition, m->offset);  // a counted, deliberate drop
              }
              metrics.queue_depth.Set(static_cast<double>(queue.size()));
            }
          }
        }
      }
      rd_kafka_message_destroy(m);
    }
    consumer.storeFinishedOffsets();
    if (Clock::now() - last_budget_refresh > std::chrono::seconds(1)) {
      if (llm.enabled()) llm.refreshBudget();
      tracker_scores.refresh();
      refreshLag();
      last_budget_refresh = Clock::now();
    }
    if (run.exit_when_idle_s && last_activity && queue.size() == 0 && busy_workers == 0 &&
        tracker.pending() == 0 && feedback_tracker.pending() == 0 && llm.pending() == 0 &&
        Clock::now() - *last_activity >= std::chrono::duration<double>(*run.exit_when_idle_s)) {
      spdlog::info("idle for {} s: stopping", *run.exit_when_idle_s);
      break;
    }
  }

  if (g_stop) spdlog::info("stop requested (SIGTERM or SIGINT): stopping");
  if (const long n = feedback_log.pendingSuppressed())
    spdlog::warn(
        "{} more invalid-feedback log line(s) were suppressed (every one is counted in "
        "assay_feedback_events_total{{outcome=\"invalid\"}})",
        n);
  if (const long n = invalid_log.pendingSuppressed())
    spdlog::warn(
        "{} more invalid-message log line(s) were suppressed (every invalid message is "
        "counted in assay_events_invalid_total)",
        n);
  // ---- Shutdown, in reverse: stop polling (done), drain the queue, flush sinks, commit.
  queue.close();
  const auto deadline = Clock::now() + std::chrono::milliseconds(config.limits.drain_timeout_ms);
  while ((queue.size() > 0 || busy_workers > 0 || llm.pending() > 0) && Clock::now() < deadline) {
    producer.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto left = queue.takeAll();
  if (!left.empty()) {
    metrics.dropped_shutdown.Increment(static_cast<double>(left.size()));
    spdlog::warn(
        "shutdown: {} sampled event(s) not judged within drain_timeout_ms; their "
        "offsets are not committed, so they are redelivered",
        left.size());
  }
  for (auto& w : workers) w.join();
  if (llm.pending() > 0)
    spdlog::warn(
        "shutdown: {} LLM call(s) still running after drain_timeout_ms; their events "
        "are not committed and will be judged again",
        llm.pending());
  if (llm.enabled()) llm.refreshBudget();
  llm.stop();
  tracker_scores.refresh();  // before the sinks and lambdas its callbacks use are destroyed
  for (auto& sink : sinks) sink->flush();
  producer.flush(10000);
  consumer.close();
  metrics.queue_depth.Set(0);

  const auto value = [](prometheus::Counter& c) { return static_cast<long>(c.Value()); };
  long invalid_total = 0;
  std::string invalid_detail;
  for (int i = 0; i < kInvalidReasonCount; ++i) {
    const long n = value(*metrics.invalid[i]);
    invalid_total += n;
    if (n)
      invalid_detail += fmt::format(" {}={}", invalidReasonName(static_cast<InvalidReason>(i)), n);
  }
  long sampled = 0;
  for (const auto& mf : metrics.registry().Collect())
    if (mf.name == "assay_events_sampled_total")
      for (const auto& m : mf.metric) sampled += static_cast<long>(m.counter.value);
  const double busy_s = last_judged_ns > first_consumed_ns
                            ? static_cast<double>(last_judged_ns - first_consumed_ns) / 1e9
                            : 0.0;
  spdlog::info("stopped: consumed {}, sampled {}, invalid {}{}{}, judged {}, dropped {}",
               value(metrics.consumed), sampled, invalid_total, invalid_detail.empty() ? "" : " (",
               invalid_detail.empty() ? "" : invalid_detail.substr(1) + ")", value(metrics.judged),
               value(metrics.dropped_queue_full) + value(metrics.dropped_shutdown));
  if (busy_s > 0) {
    spdlog::info(
        "throughput: {} events judged in {:.3f} s from first message to last judgment "
        "({:.0f} events/s)",
        value(metrics.judged), busy_s, static_cast<double>(value(metrics.judged)) / busy_s);
  }
  return exit_code;
}

}  // namespace assay
