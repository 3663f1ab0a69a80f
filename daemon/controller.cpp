// The controller: the admin endpoint's texts, SIGHUP reload, systemd notify, the exit summary.
#include "daemon/controller.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <map>

#include "config/loader.hpp"
#include "config/reload.hpp"
#include "core/clock.hpp"
#include "core/exposition.hpp"
#include "core/service_notify.hpp"
#include "core/yaml_load.hpp"
#include "daemon/check_config.hpp"
#include "daemon/coverage.hpp"
#include "daemon/log_setup.hpp"

namespace assay {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};

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

}  // namespace

namespace {

std::vector<JudgeVersions::Configured> configuredVersions(const Config& config) {
  std::vector<JudgeVersions::Configured> out;
  for (const auto& j : config.judges) out.push_back({j.name, j.version});
  return out;
}

}  // namespace

bool requestStop() { return g_stop.exchange(true); }
bool stopRequested() { return g_stop.load(); }
void requestReload() { g_reload.store(true); }

Controller::Controller(const Config& config, RunOptions run)
    : config_(config),
      run_(std::move(run)),
      registry_(std::make_shared<prometheus::Registry>()),
      ab_(config.ab.experiments.empty() ? nullptr
                                        : std::make_unique<ab::AbService>(
                                              config.ab, ab::makeStore(config.budget), *registry_)),
      admin_(config.admin.listen,
             {[this] { return serializeMetrics(*registry_); }, [this] { return text(not_ready_); },
              [this] { return text(stalled_why_); },
              [this](std::string_view query) {
                return ab_ ? ab_->route(query)
                           : std::pair<int, std::string>{
                                 404,
                                 "{\"error\":\"no experiment is configured (ab.experiments)\"}\n"};
              },
              // The gauge exists before the server starts: this runs on the admin thread.
              [gauge = routesWaitingGauge(config, *registry_)](int waiting) {
                if (gauge) gauge->Set(waiting);
              }}),
      start_text_(config.text),
      applied_text_(config.text) {
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
  versions_ = std::make_unique<JudgeVersions>(*registry_);
  versions_->update(configuredVersions(config));
  const std::string host = config.admin.listen.substr(0, config.admin.listen.rfind(':'));
  spdlog::info("admin: http://{}:{}/metrics, /healthz, /readyz", host.empty() ? "0.0.0.0" : host,
               admin_.port());
}

Controller::~Controller() = default;

void Controller::setText(std::string& field, std::string value) {
  std::lock_guard lock(text_mu_);
  if (field != value) field = std::move(value);
}

std::string Controller::text(const std::string& field) const {
  std::lock_guard lock(text_mu_);
  return field;
}

int Controller::run(Pipeline& p) {
  p.replay();
  while (!g_stop.load() && p.pollOnce(100)) {
    supervise(p);
    if (run_.exit_when_idle_s && p.idleFor(*run_.exit_when_idle_s)) {
      spdlog::info("idle for {} s: stopping", *run_.exit_when_idle_s);
      break;
    }
  }
  if (g_stop) spdlog::info("stop requested (SIGTERM or SIGINT): stopping");
  p.shutdown();
  logExitSummary(p);
  return p.exitCode();
}

void Controller::supervise(Pipeline& p) {
  if (g_reload.exchange(false)) {
    spdlog::info("SIGHUP: reopening the sinks' files, reloading {}", config_.file);
    p.reopenSinks();
    reloadConfig(p);
  }
  std::string not_ready = p.notReady();
  setText(not_ready_, not_ready);
  const auto now = Clock::now();
  if (now - last_second_ < std::chrono::seconds(1)) return;
  last_second_ = now;
  checkStalls(p);
  notifyService(p, not_ready);
}

void Controller::reloadConfig(Pipeline& p) {
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
  ReloadDiff diff = diffConfigs(applied_text_, text);
  // A file a judge scores with (OptionSpec::file_digest: claim_support's weights) edited in place:
  // the configuration reads the same, the judge's version does not. Rebuilt like an edit.
  for (const auto& j : res.config.judges) {
    const std::string current = versions_->current(j.name);
    if (!current.empty() && j.version && current != j.version->id && !diff.judges) {
      diff.judges = true;
      diff.changed_judges.push_back("'" + j.name + "' (a file it reads changed)");
    }
  }
  const std::vector<std::string> restart = diffConfigs(start_text_, text).restart;
  const Config* applied_ptr = &res.config;
  if (diff.judges || diff.budget_cap) {
    applied_ptr = p.replaceJudges(std::make_unique<Config>(std::move(res.config)),
                                  "SIGHUP: " + config_.file + " rejected");
    if (!applied_ptr) return count("rejected");
  }
  const Config& applied = *applied_ptr;  // the pipeline keeps the judges' configuration
  if (diff.judges || diff.budget_cap) {
    std::string names, changed;
    for (const auto& j : applied.judges) names += (names.empty() ? "" : ", ") + j.name;
    for (const auto& c : diff.changed_judges) changed += (changed.empty() ? "" : ", ") + c;
    spdlog::info(
        "SIGHUP: judges rebuilt ({}{}{}): {}; global cap €{}/day; events already being judged "
        "finish with the previous judges",
        changed, !changed.empty() && diff.budget_cap ? ", " : "",
        diff.budget_cap ? "the budget caps" : "", names.empty() ? "none" : names,
        applied.budget.daily_limit_eur);
    versions_->update(configuredVersions(applied));
  }
  if (diff.sampling) {
    p.setSampling(applied.sampling);
    spdlog::info("SIGHUP: sampling applied (rate {}, {} rule(s))", applied.sampling.rate,
                 applied.sampling.rules.size());
  }
  if (!diff.judges && !diff.budget_cap)
    for (const std::size_t i : diff.judge_rates) {
      p.setJudgeRate(i, applied.judges[i].rate);
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

void Controller::checkStalls(const Pipeline& p) {
  // One entry per judge name (a reload's replaced set may still have runs of the same judge).
  std::map<std::string, JudgeRunner::Silence> by_name;
  for (auto& s : p.runner().silences()) {
    s.stats->stalled->Set(s.stalled ? 1 : 0);  // each version's own series
    auto [it, added] = by_name.try_emplace(s.judge, s);
    if (!added && (s.stalled || s.silent_seconds > it->second.silent_seconds)) it->second = s;
  }
  std::string why;
  std::set<std::string> now_stalled;
  for (const auto& [name, s] : by_name) {
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
  // A sink stuck in a write: its judgments wait (and, with sinks.when_full: block, consumption
  // pauses) while nothing else would say why.
  const std::string sinks = p.stuckSinks(kSinkStuckSeconds);
  if (!sinks.empty() && !sinks_stuck_)
    spdlog::error("{}; /healthz says 503 until it writes again", sinks);
  else if (sinks.empty() && sinks_stuck_)
    spdlog::info("the sinks write again");
  sinks_stuck_ = !sinks.empty();
  if (!sinks.empty()) why += (why.empty() ? "" : "; ") + sinks;
  setText(stalled_why_, std::move(why));
}

void Controller::notifyService(const Pipeline& p, const std::string& not_ready) {
  if (!service::supervised()) return;
  const auto now = Clock::now();
  const bool first = !ready_notified_ && p.storeReady();
  if (!first && now - status_at_ < std::chrono::seconds(5)) return;
  const double consumed = p.source().stats().consumed.Value();
  const double judged = p.sinkStats().judged.Value();
  const double s = std::chrono::duration<double>(now - status_at_).count();
  const std::string line =
      fmt::format("consumed {:.1f}/s, judged {:.1f}/s ({:.0f} and {:.0f} in all); {}",
                  status_at_ == Clock::time_point{} ? 0.0 : (consumed - status_consumed_) / s,
                  status_at_ == Clock::time_point{} ? 0.0 : (judged - status_judged_) / s, consumed,
                  judged, not_ready.empty() ? "ready" : "not ready: " + not_ready);
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

void logExitSummary(const Pipeline& p) {
  const auto value = [](const prometheus::Counter& c) { return static_cast<long>(c.Value()); };
  const auto& consumer = p.source().stats();
  const auto& sampling = p.samplingStats();
  const auto [invalid, detail] = consumer.invalidSummary();
  const long judged = value(p.sinkStats().judged);
  spdlog::info("stopped: consumed {}, sampled {}, invalid {}{}{}{}, judged {}, dropped {}",
               value(consumer.consumed), static_cast<long>(sampling.sampledTotal()), invalid,
               detail.empty() ? "" : " (", detail, detail.empty() ? "" : ")", judged,
               value(sampling.dropped_queue_full) + value(sampling.dropped_shutdown));
  // Coverage (daemon/coverage.hpp): after the stop nothing is in flight, so every event must be
  // accounted for every judge; a gap is a bug (events lost between counters).
  const Coverage coverage = coverageOf(p.registry().Collect());
  std::string gaps;
  for (const auto& [judge, n] : coverage.unaccounted)
    if (n != 0) gaps += fmt::format("{}{}: {:+.0f}", gaps.empty() ? "" : ", ", judge, n);
  if (!gaps.empty() || coverage.inFlight() != 0)
    spdlog::error(
        "coverage: {} consumed, {} finished; events not accounted for by each judge's terminal "
        "counters: {} (a bug: please report it with this line)",
        coverage.consumed, coverage.finished, gaps.empty() ? "none" : gaps);
  else
    spdlog::info(
        "coverage: each of the {} consumed events ended in one terminal counter of "
        "every judge ({} judges)",
        coverage.consumed, coverage.unaccounted.size());
  if (const auto t = p.sinkStats().troubles(); !t.text.empty())
    spdlog::warn(
        "sinks: not every judgment was written: {} (assay_sink_writes_total, "
        "assay_sink_dropped_total)",
        t.text);
  if (const long pauses = value(sampling.pauses); pauses > 0)
    spdlog::info("back-pressure: consumption paused {} time(s) while the judge backlog was full",
                 pauses);
  const auto assigned_at = p.source().firstAssignedAt();
  const auto last_event = p.source().lastEventAt();
  const long consumed = value(consumer.consumed);
  if (assigned_at != Clock::time_point{} && consumed > 0 && last_event > assigned_at) {
    const double s = std::chrono::duration<double>(last_event - assigned_at).count();
    spdlog::info(
        "consumption: {} messages in {:.3f} s from the first partition assignment to the last "
        "message ({:.0f} messages/s; librdkafka's fetchers woken {} time(s))",
        consumed, s, static_cast<double>(consumed) / s, p.source().fetchWakeups());
  }
  const auto first = p.source().firstConsumedAt();
  const double busy_s = static_cast<double>(p.lastJudgedNs() - steadyNs(first)) / 1e9;
  if (first != Clock::time_point{} && busy_s > 0)
    spdlog::info(
        "throughput: {} events judged in {:.3f} s from first message to last judgment "
        "({:.0f} events/s)",
        judged, busy_s, static_cast<double>(judged) / busy_s);
}

}  // namespace assay
