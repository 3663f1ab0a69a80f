#pragma once
/// What supervises a running pipeline from outside (docs/ARCHITECTURE.md), owned by main:
/// the metrics registry and the admin endpoint (/metrics, /healthz, /readyz, /v1/route with the
/// A/B router beside it), SIGHUP reload, readiness, systemd notify, and the exit summary. It
/// changes a running pipeline only through the pipeline's narrow setters (setSampling,
/// setJudgeRate, replaceJudges, reopenSinks), on the poll thread, between two turns.
///
/// Built before the pipeline, so that a port in use fails start-up before anything joins the
/// consumer group; destroyed after it. The admin thread reads only the registry and the
/// readiness and health texts this class sets each turn, never the pipeline.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "config/options.hpp"
#include "daemon/ab/ab.hpp"
#include "daemon/admin_server.hpp"
#include "daemon/pipeline.hpp"
#include "tracking/judge_versions.hpp"

namespace assay {

/// Asks a running pipeline to stop (async-signal-safe: one atomic exchange). Returns true if a
/// stop was requested before (a second SIGTERM ends the process at once).
bool requestStop();
/// Whether a stop was requested (any thread).
bool stopRequested();
/// SIGHUP: asks the controller, on the next turn, to have the sinks reopen their files
/// (logrotate) and to reload the configuration file. Async-signal-safe: one atomic store.
void requestReload();

class Controller {
 public:
  /// Starts the registry, the A/B experiments (ab.experiments) and the admin endpoint.
  /// Throws std::exception naming the cause (a port in use).
  Controller(const Config& config, RunOptions run);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  /// What the pipeline is built with: this registry and the A/B experiments.
  PipelineWiring wiring() { return {registry_, ab_.get()}; }
  unsigned short adminPort() const { return admin_.port(); }

  /// Produces the --replay files, turns the pipeline until requestStop() or --exit-when-idle,
  /// shuts it down and logs the exit summary. Returns the pipeline's exit code.
  int run(Pipeline& p);
  /// After each turn: SIGHUP, readiness, and once a second health (stalled judges) and
  /// systemd's STATUS=.
  void supervise(Pipeline& p);

 private:
  /// SIGHUP: reads config_.file again. Invalid (load, start-up or secret errors, a judge that
  /// cannot be built): logged with FILE:LINE:COL, nothing changes. Valid: `sampling`, `log`,
  /// `judges` and `budget.daily_limit_eur` apply at once (queued samples and calls in flight
  /// are kept); any other difference is logged as needing a restart. Counted in
  /// assay_config_reloads_total{result}.
  void reloadConfig(Pipeline& p);
  /// Each second: assay_judge_stalled, the stalls' log lines, a sink stuck in a write,
  /// /healthz's text.
  void checkStalls(const Pipeline& p);
  /// systemd (service_notify.hpp): READY=1 once the pipeline is ready but for its partition
  /// assignment (the budget store answers), then every 5 s STATUS= with the consumed and
  /// judged rates and readiness.
  void notifyService(const Pipeline& p, const std::string& not_ready);
  void setText(std::string& field, std::string value);
  std::string text(const std::string& field) const;

  const Config& config_;
  const RunOptions run_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ab::AbService> ab_;  // null without ab.experiments
  // Set on the poll thread, read by the admin thread.
  mutable std::mutex text_mu_;
  std::string not_ready_ =
      "waiting for the Kafka partition assignment (joining the consumer group)";
  std::string stalled_why_;
  AdminServer admin_;
  std::set<std::string> stalled_judges_;  // to log each stall's start and end
  /// /healthz: a sink with judgments waiting that finished no write for this long is stuck.
  static constexpr double kSinkStuckSeconds = 60;
  bool sinks_stuck_ = false;
  std::string start_text_;                   // the configuration file assayd started with
  std::string applied_text_;                 // the file whose live parts were last applied
  std::unique_ptr<JudgeVersions> versions_;  // the judges' versions: start-up, then reloads
  prometheus::Family<prometheus::Counter>* reloads_ = nullptr;
  prometheus::Gauge* reload_ok_ = nullptr;       // assay_config_last_reload_successful
  prometheus::Gauge* restart_needed_ = nullptr;  // assay_config_restart_needed
  std::chrono::steady_clock::time_point last_second_{}, status_at_{};
  double status_consumed_ = 0, status_judged_ = 0;
  bool ready_notified_ = false;
};

/// The exit summary's log lines: consumed, sampled, invalid, judged, dropped; back-pressure;
/// consumption and throughput rates (scripts/bench reads them).
void logExitSummary(const Pipeline& p);

}  // namespace assay
