#include "daemon/judge_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "config/loader.hpp"
#include "core/clock.hpp"
#include "core/log_text.hpp"
#include "core/rate_limited_log.hpp"
#include "judges/registry.hpp"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

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
    ctx.version = jc.version ? jc.version->id : "";
    ctx.budget = &config.budget;
    ctx.max_waiting = judgeBacklog(config.limits);
    ctx.hold_when_open = config.limits.when_full == LimitsOptions::WhenFull::kBlock;
    ctx.services = &services;
    const std::string where = "judges[" + std::to_string(i) + "]";
    try {
      out.push_back(RunnableJudge{jc.name, jc.factory->info(jc.values), jc.rate, jc.run_if,
                                  jc.factory->create(jc.values, ctx),
                                  d.cost == CostClass::kRemoteCall, d.outcomes, std::nullopt,
                                  jc.version});
    } catch (const OptionError& e) {  // e.g. an API key variable unset in the service's env
      const auto at = jc.key_positions.find(e.key);
      const auto [line, column] = at != jc.key_positions.end() ? at->second : jc.position;
      throw ConfigurationError(ConfigError{config.file, line, column,
                                           where + (e.key.empty() ? "" : "." + e.key), e.what()}
                                   .format());
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

/// One judge set: the configuration's judges (replaced whole by a reload), with their run_if
/// resolved to indexes, their series and their live rates.
struct JudgeRunner::Set {
  std::vector<RunnableJudge> judges;
  std::vector<std::vector<Condition>> conditions;  // run_if, resolved to indexes
  std::vector<JudgeStats::Judge*> stats;
  std::unique_ptr<std::atomic<double>[]> rates;  // judges[i].rate, then reloads
  /// Per judge: asynchronous runs outstanding, and since when (steady ns) it has been silent:
  /// its last verdict, or the start of a run when none was outstanding (silences()).
  struct Progress {
    std::atomic<int> outstanding{0};
    std::atomic<std::int64_t> silent_since_ns{0};
  };
  std::unique_ptr<Progress[]> progress;
  /// The series of the judges configured in this process that this set lacks (coverage:
  /// counted not_configured for each event it completes). Guarded by coverage_mu_.
  std::vector<JudgeStats::Judge*> absent;
  mutable std::atomic<int> pending_events{
      0};  // events of this set whose asynchronous verdicts wait
};

/// One event's verdicts while asynchronous ones are on their way.
struct JudgeRunner::Pending {
  const Set* set = nullptr;  // the judges it started with (every set lives as long as the runner)
  Judgment judgment;         // id, tenant… (verdicts filled at the end)
  std::vector<std::optional<JudgedVerdict>> slots;  // one per configured judge
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::vector<MessageRef> messages;
  std::mutex mu;
  std::size_t remaining = 0;  // asynchronous verdicts still to come
  // redact: the event's numbering, and the event as the LLM judges see it.
  std::unique_ptr<Redactor::Session> session;
  std::unique_ptr<Event> redacted;
};

JudgeRunner::JudgeRunner(std::vector<RunnableJudge> judges, JudgeStats& stats,
                         BoundedQueue<WorkItem>& queue, Listener listener, int workers,
                         JudgeServices* services)
    : judge_stats_(stats), queue_(queue), listener_(std::move(listener)), services_(services) {
  current_ = makeSet(std::move(judges));
  {
    std::lock_guard lock(set_mu_);
    updateCoverage(*current_);
  }
  pool_ = std::make_unique<WorkerPool>(
      workers,
      [this] {
        while (auto item = queue_.pop()) run(*item);
      },
      [this] { queue_.close(); });
}

std::shared_ptr<JudgeRunner::Set> JudgeRunner::makeSet(std::vector<RunnableJudge> judges) {
  auto set = std::make_shared<Set>();
  set->judges = std::move(judges);
  set->rates = std::make_unique<std::atomic<double>[]>(set->judges.size());
  set->progress = std::make_unique<Set::Progress[]>(set->judges.size());
  for (std::size_t i = 0; i < set->judges.size(); ++i) {
    auto& j = set->judges[i];
    if (!j.tracked) j.tracked = i;
    set->rates[i].store(j.rate);
    set->stats.push_back(
        &judge_stats_.add(j.name, j.version ? j.version->id : "", j.info, j.outcomes));
    auto& conditions = set->conditions.emplace_back();
    for (const auto& c : j.run_if)
      for (std::size_t k = 0; k < i; ++k)
        if (set->judges[k].name == c.judge) conditions.push_back({k, c});
  }
  return set;
}

std::shared_ptr<JudgeRunner::Set> JudgeRunner::current() const {
  std::lock_guard lock(set_mu_);
  return current_;
}

void JudgeRunner::replaceJudges(std::vector<RunnableJudge> judges) {
  auto set = makeSet(std::move(judges));
  std::lock_guard lock(set_mu_);
  updateCoverage(*set);
  retired_.push_back(std::exchange(current_, std::move(set)));
}

void JudgeRunner::updateCoverage(Set& added) {
  std::lock_guard lock(coverage_mu_);
  for (std::size_t i = 0; i < added.judges.size(); ++i) {
    const auto it = std::find_if(ever_.begin(), ever_.end(),
                                 [&](const auto& e) { return e.first == added.judges[i].name; });
    if (it != ever_.end()) {
      it->second = added.stats[i];  // its latest version's series
      continue;
    }
    // Every event completed before it existed ends, for it, as not_configured.
    added.stats[i]->skipped_not_configured->Increment(static_cast<double>(completed_));
    ever_.emplace_back(added.judges[i].name, added.stats[i]);
  }
  std::vector<Set*> sets;
  for (const auto& r : retired_) sets.push_back(r.get());
  if (current_) sets.push_back(current_.get());
  sets.push_back(&added);
  for (Set* set : sets) {
    set->absent.clear();
    for (const auto& known : ever_)  // (clang 14 cannot capture a structured binding)
      if (std::none_of(set->judges.begin(), set->judges.end(),
                       [&](const RunnableJudge& j) { return j.name == known.first; }))
        set->absent.push_back(known.second);
  }
}

std::vector<JudgeRunner::Silence> JudgeRunner::silences() const {
  // Read under the lock, without copying the sets' shared_ptrs: a copy is a virtual call on
  // the control block, whose UBSan vptr check needs a spare file descriptor (pipe()) when its
  // cache misses, and this runs every second, also while descriptors run out (admin_fds).
  std::lock_guard lock(set_mu_);
  std::vector<const Set*> sets;
  for (const auto& r : retired_) sets.push_back(r.get());
  sets.push_back(current_.get());
  const std::int64_t now = steadyNs(Clock::now());
  std::vector<Silence> out;
  for (std::size_t k = 0; k < sets.size(); ++k) {
    const Set& set = *sets[k];
    for (std::size_t i = 0; i < set.judges.size(); ++i) {
      const auto limit = set.judges[i].judge->maxSilence();
      const int outstanding = set.progress[i].outstanding.load();
      if (!limit) continue;  // a retired idle set too: its version's stalled gauge goes to 0
      Silence s;
      s.judge = set.judges[i].name;
      s.outstanding = outstanding;
      s.silent_seconds =
          outstanding > 0 ? static_cast<double>(now - set.progress[i].silent_since_ns.load()) / 1e9
                          : 0.0;
      s.limit_seconds = static_cast<double>(limit->count());
      s.stalled = outstanding > 0 && s.silent_seconds > s.limit_seconds;
      s.stats = set.stats[i];
      out.push_back(std::move(s));
    }
  }
  return out;
}

void JudgeRunner::countAbandoned() {
  std::lock_guard lock(set_mu_);
  std::vector<Set*> sets;
  for (const auto& r : retired_) sets.push_back(r.get());
  sets.push_back(current_.get());
  std::lock_guard coverage(coverage_mu_);
  for (Set* set : sets) {
    for (std::size_t i = 0; i < set->judges.size(); ++i)
      if (const int n = set->progress[i].outstanding.exchange(0); n > 0)
        set->stats[i]->abandoned->Increment(n);
    // The events left waiting never complete: the judges their set lacks end them here.
    if (const int n = set->pending_events.load(); n > 0)
      for (auto* stats : set->absent) stats->skipped_not_configured->Increment(n);
  }
}

std::vector<JudgeRunner::Handle> JudgeRunner::currentJudges() const {
  std::vector<Handle> out;
  for (const auto& j : current()->judges)
    out.push_back({j.name, j.version ? j.version->id : "", j.info, j.judge.get(), j.asynchronous});
  return out;
}

std::vector<std::string> JudgeRunner::judgeNames() const {
  std::vector<std::string> out;
  for (const auto& j : current()->judges) out.push_back(j.name);
  return out;
}

void JudgeRunner::setRate(std::size_t index, double rate) {
  const auto set = current();
  if (index < set->judges.size()) set->rates[index].store(rate, std::memory_order_relaxed);
}

double JudgeRunner::rate(std::size_t index) const {
  const auto set = current();
  return index < set->judges.size() ? set->rates[index].load(std::memory_order_relaxed) : 0.0;
}

JudgeRunner::~JudgeRunner() {
  join();
  // No worker starts a judgement any more: stop the threads that could still call back into
  // the judges, before the judges (members) go.
  if (services_) services_->stop();
}

void JudgeRunner::join() { pool_->join(); }

void JudgeRunner::setRedaction(std::shared_ptr<const Redactor> redactor,
                               std::vector<prometheus::Counter*> counters) {
  redactor_ = std::move(redactor);
  redaction_counters_ = std::move(counters);
}

bool JudgeRunner::admitted(const Set& set, std::size_t index, const Pending& p) const {
  for (const auto& [k, c] : set.conditions[index]) {
    const auto& slot = p.slots[k];
    if (!slot || !slot->verdict.score) return false;  // no verdict, or no score
    const double score = *slot->verdict.score;
    if (c.below && !(score < *c.below)) return false;
    if (c.above && !(score > *c.above)) return false;
    if (c.passed && slot->verdict.passed != c.passed) return false;
  }
  return true;
}

JudgedVerdict JudgeRunner::record(const Set& set, std::size_t i, const Pending& p, Verdict v,
                                  double seconds) {
  auto& s = *set.stats[i];
  const auto& j = set.judges[i];
  judge_stats_.countRun(s, v.outcome);
  // A run the budget or the prompt size stopped before any call took no judging time: its
  // near-zero duration would pull the latency down exactly when calls are refused (issue 29).
  if (v.outcome != Outcome::kSkippedBudget && v.outcome != Outcome::kContextTooLong)
    s.latency->Observe(seconds);
  if (v.outcome == Outcome::kOk && v.score) {
    s.score->Observe(*v.score);
    if (listener_.scored) listener_.scored(*j.tracked, p.judgment.id, p.judgment.variant, *v.score);
  }
  return JudgedVerdict{j.name,           j.info.criterion, std::move(v), j.info.min_score,
                       j.info.max_score, seconds * 1000.0, j.version};
}

Verdict JudgeRunner::runSync(const Set& set, std::size_t i, const Event& event) {
  try {
    return set.judges[i].judge->judge(event);
  } catch (const std::exception& e) {
    return judgeError(set.judges[i].name, e.what());
  } catch (...) {
    return judgeError(set.judges[i].name, "an unknown exception");
  }
}

void JudgeRunner::startAsync(std::size_t i, const Event& event, const std::shared_ptr<Pending>& p) {
  const auto t0 = Clock::now();
  auto& progress = p->set->progress[i];
  // The silence starts now if nothing was outstanding; set before the count rises, so that
  // silences() never pairs a new run with an old time.
  if (progress.outstanding.load() == 0) progress.silent_since_ns = steadyNs(t0);
  progress.outstanding.fetch_add(1);
  auto once = std::make_shared<std::atomic<bool>>(false);  // a judge that throws after answering
  auto done = [this, i, p, t0, once](Verdict v) {
    if (once->exchange(true)) return;
    auto& progress = p->set->progress[i];
    progress.silent_since_ns = steadyNs(Clock::now());
    progress.outstanding.fetch_sub(1);
    auto jv = record(*p->set, i, *p, std::move(v), secondsSince(t0));
    bool last = false;
    {
      std::lock_guard lock(p->mu);
      p->slots[i] = std::move(jv);
      last = --p->remaining == 0;
    }
    if (last) {
      complete(*p);
      --p->set->pending_events;
      --pending_;
    }
  };
  const auto& judge = p->set->judges[i];
  try {
    judge.judge->judgeAsync(event, done);
  } catch (const std::exception& e) {
    done(judgeError(judge.name, e.what()));
  }
}

void JudgeRunner::run(const WorkItem& item) {
  ++busy_;
  if (listener_.started) listener_.started(item);
  const std::shared_ptr<Set> owner = current();
  const Set& set = *owner;
  auto p = std::make_shared<Pending>();
  p->set = &set;
  const Event& e = item.event;
  p->judgment = Judgment{e.id, e.tenant, e.app, e.variant, epochMs(), {}, backfill_};
  p->slots.resize(set.judges.size());
  p->partition = item.partition;
  p->offset = item.offset;
  p->messages = item.messages;
  std::vector<std::size_t> later;  // asynchronous judges: their run_if sees every local verdict
  // redact: one numbering per event; the redacted copy is made when a judge will see it.
  const bool redact_local = redactor_ && redactor_->options().local_judges;
  const auto redacted = [&]() -> const Event& {
    if (!p->session) p->session = std::make_unique<Redactor::Session>(*redactor_);
    if (!p->redacted) p->redacted = std::make_unique<Event>(redactor_->redact(e, *p->session));
    return *p->redacted;
  };
  for (std::size_t i = 0; i < set.judges.size(); ++i) {
    if (!item.sample.admits(set.rates[i].load(std::memory_order_relaxed))) {
      set.stats[i]->skipped_rate->Increment();
      continue;
    }
    if (set.judges[i].asynchronous) {
      later.push_back(i);
      continue;
    }
    if (!admitted(set, i, *p)) {
      set.stats[i]->skipped_run_if->Increment();
      continue;
    }
    const auto t0 = Clock::now();
    Verdict v = runSync(set, i, redact_local ? redacted() : e);
    p->slots[i] = record(set, i, *p, std::move(v), secondsSince(t0));
  }
  std::erase_if(later, [&](std::size_t i) {
    if (admitted(set, i, *p)) return false;
    set.stats[i]->skipped_run_if->Increment();
    return true;
  });
  const Event& remote = redactor_ && !later.empty() ? redacted() : e;
  if (later.empty()) {
    complete(*p);
  } else {
    ++pending_;
    ++set.pending_events;
    p->remaining = later.size();  // before any start: a verdict may come back at once
    for (std::size_t i : later) startAsync(i, remote, p);
  }
  --busy_;
}

void JudgeRunner::complete(Pending& p) {
  {
    std::lock_guard lock(coverage_mu_);
    for (auto* stats : p.set->absent) stats->skipped_not_configured->Increment();
    ++completed_;
  }
  if (redactor_ && redactor_->options().sinks) {
    if (!p.session) p.session = std::make_unique<Redactor::Session>(*redactor_);
    for (auto& s : p.slots)
      if (s && !s->verdict.evidence.empty())
        s->verdict.evidence = p.session->apply(s->verdict.evidence);
  }
  if (p.session)
    for (std::size_t i = 0; i < redaction_counters_.size(); ++i)
      if (const auto n = p.session->counts()[i]; n > 0)
        redaction_counters_[i]->Increment(static_cast<double>(n));
  for (auto& s : p.slots)
    if (s) p.judgment.verdicts.push_back(std::move(*s));
  if (listener_.judged) listener_.judged(p.judgment, p.partition, p.offset, p.messages);
}

}  // namespace assay
