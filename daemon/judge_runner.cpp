#include "daemon/judge_runner.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <stdexcept>

#include "config/loader.hpp"
#include "judges/log_text.hpp"
#include "judges/rate_limited_log.hpp"
#include "judges/registry.hpp"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t nowEpochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

RateLimitedLog g_judge_error_log;

Verdict judgeError(const std::string& judge, const char* what) {
  long suppressed = 0;
  if (g_judge_error_log.allow(suppressed))
    spdlog::error("judge '{}' threw: {} (outcome judge_error){}", judge, logText(what),
                  RateLimitedLog::note(suppressed));
  return Verdict::fail(Outcome::kJudgeError, std::string("the judge failed: ") + what);
}

}  // namespace

std::vector<RunnableJudge> buildJudges(const Config& config, JudgeServices& services) {
  std::vector<RunnableJudge> out;
  for (std::size_t i = 0; i < config.judges.size(); ++i) {
    const auto& jc = config.judges[i];
    const auto& d = *jc.factory->descriptor;
    JudgeContext ctx;
    ctx.name = jc.name;
    ctx.budget = &config.budget;
    ctx.max_waiting = judgeBacklog(config.limits);
    ctx.services = &services;
    const std::string where = "judges[" + std::to_string(i) + "]";
    try {
      out.push_back(RunnableJudge{jc.name, jc.factory->info(jc.values), jc.rate, jc.run_if,
                                  jc.factory->create(jc.values, ctx),
                                  d.cost == CostClass::kRemoteCall, d.outcomes});
    } catch (const OptionError& e) {  // e.g. an API key variable unset in the service's env
      throw ConfigurationError(where + (e.key.empty() ? "" : "." + e.key) + ": " + e.what());
    } catch (const std::exception& e) {
      throw std::runtime_error(where + " ('" + jc.name + "'): " + e.what());
    }
  }
  return out;
}

// ---- WorkerPool ---------------------------------------------------------------------------------

WorkerPool::WorkerPool(int threads, const std::function<void()>& body, std::function<void()> stop)
    : stop_(std::move(stop)) {
  try {
    for (int i = 0; i < threads; ++i) threads_.emplace_back(body);
  } catch (...) {
    join();
    throw;
  }
}

WorkerPool::~WorkerPool() { join(); }

void WorkerPool::join() {
  if (stop_) stop_();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

// ---- JudgeRunner --------------------------------------------------------------------------------

/// One event's verdicts while asynchronous ones are on their way.
struct JudgeRunner::Pending {
  Judgment judgment;                                // id, tenant… (verdicts filled at the end)
  std::vector<std::optional<JudgedVerdict>> slots;  // one per configured judge
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::mutex mu;
  std::size_t remaining = 0;  // asynchronous verdicts still to come
};

JudgeRunner::JudgeRunner(std::vector<RunnableJudge> judges, JudgeStats& stats,
                         BoundedQueue<WorkItem>& queue, Listener listener, int workers,
                         JudgeServices* services)
    : judges_(std::move(judges)),
      judge_stats_(stats),
      queue_(queue),
      listener_(std::move(listener)),
      services_(services) {
  rates_ = std::make_unique<std::atomic<double>[]>(judges_.size());
  for (std::size_t i = 0; i < judges_.size(); ++i) {
    const auto& j = judges_[i];
    rates_[i].store(j.rate);
    stats_.push_back(&stats.add(j.name, j.info, j.outcomes));
    auto& conditions = conditions_.emplace_back();
    for (const auto& c : j.run_if)
      for (std::size_t k = 0; k < i; ++k)
        if (judges_[k].name == c.judge) conditions.push_back({k, c});
  }
  pool_ = std::make_unique<WorkerPool>(
      workers,
      [this] {
        while (auto item = queue_.pop()) run(*item);
      },
      [this] { queue_.close(); });
}

void JudgeRunner::setRate(std::size_t index, double rate) {
  if (index < judges_.size()) rates_[index].store(rate, std::memory_order_relaxed);
}

JudgeRunner::~JudgeRunner() {
  join();
  // No worker starts a judgement any more: stop the threads that could still call back into
  // the judges, before the judges (members) go.
  if (services_) services_->stop();
}

void JudgeRunner::join() { pool_->join(); }

bool JudgeRunner::admitted(std::size_t index, const Pending& p) const {
  for (const auto& [k, c] : conditions_[index]) {
    const auto& slot = p.slots[k];
    if (!slot || !slot->verdict.score) return false;  // no verdict, or no score
    const double score = *slot->verdict.score;
    if (c.below && !(score < *c.below)) return false;
    if (c.above && !(score > *c.above)) return false;
    if (c.passed && slot->verdict.passed != c.passed) return false;
  }
  return true;
}

JudgedVerdict JudgeRunner::record(std::size_t i, const Pending& p, Verdict v, double seconds) {
  auto& s = *stats_[i];
  judge_stats_.countRun(s, v.outcome);
  s.latency->Observe(seconds);
  if (v.outcome == Outcome::kOk && v.score) {
    s.score->Observe(*v.score);
    if (listener_.scored) listener_.scored(i, p.judgment.id, p.judgment.variant, *v.score);
  }
  const auto& j = judges_[i];
  return JudgedVerdict{j.name,           j.info.criterion, std::move(v),
                       j.info.min_score, j.info.max_score, seconds * 1000.0};
}

Verdict JudgeRunner::runSync(std::size_t i, const Event& event) {
  try {
    return judges_[i].judge->judge(event);
  } catch (const std::exception& e) {
    return judgeError(judges_[i].name, e.what());
  } catch (...) {
    return judgeError(judges_[i].name, "an unknown exception");
  }
}

void JudgeRunner::startAsync(std::size_t i, const Event& event, const std::shared_ptr<Pending>& p) {
  const auto t0 = Clock::now();
  auto once = std::make_shared<std::atomic<bool>>(false);  // a judge that throws after answering
  auto done = [this, i, p, t0, once](Verdict v) {
    if (once->exchange(true)) return;
    auto jv = record(i, *p, std::move(v), secondsSince(t0));
    bool last = false;
    {
      std::lock_guard lock(p->mu);
      p->slots[i] = std::move(jv);
      last = --p->remaining == 0;
    }
    if (last) {
      complete(*p);
      --pending_;
    }
  };
  try {
    judges_[i].judge->judgeAsync(event, done);
  } catch (const std::exception& e) {
    done(judgeError(judges_[i].name, e.what()));
  }
}

void JudgeRunner::run(const WorkItem& item) {
  ++busy_;
  if (listener_.started) listener_.started(item);
  auto p = std::make_shared<Pending>();
  const Event& e = item.event;
  p->judgment = Judgment{e.id, e.tenant, e.app, e.variant, nowEpochMs(), {}};
  p->slots.resize(judges_.size());
  p->partition = item.partition;
  p->offset = item.offset;
  std::vector<std::size_t> later;  // asynchronous judges: their run_if sees every local verdict
  for (std::size_t i = 0; i < judges_.size(); ++i) {
    if (!item.sample.admits(rate(i))) continue;
    if (judges_[i].asynchronous) {
      later.push_back(i);
      continue;
    }
    if (!admitted(i, *p)) continue;
    const auto t0 = Clock::now();
    Verdict v = runSync(i, e);
    p->slots[i] = record(i, *p, std::move(v), secondsSince(t0));
  }
  std::erase_if(later, [&](std::size_t i) { return !admitted(i, *p); });
  if (later.empty()) {
    complete(*p);
  } else {
    ++pending_;
    p->remaining = later.size();  // before any start: a verdict may come back at once
    for (std::size_t i : later) startAsync(i, e, p);
  }
  --busy_;
}

void JudgeRunner::complete(Pending& p) {
  for (auto& s : p.slots)
    if (s) p.judgment.verdicts.push_back(std::move(*s));
  if (listener_.judged) listener_.judged(p.judgment, p.partition, p.offset);
}

}  // namespace assay
