// assayd: watches the quality of a RAG service from its Kafka events (README.md, docs/).

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "config/loader.hpp"
#include "daemon/check_config.hpp"
#include "daemon/controller.hpp"
#include "daemon/log_setup.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/version.hpp"

namespace {

constexpr const char* kUsage =
    R"(usage: assayd --config FILE [--replay EVENTS.jsonl] [--replay-feedback FEEDBACK.jsonl]
                     [--exit-when-idle SECONDS]
       assayd --check-config FILE
       assayd --version

  --config FILE            run the daemon with this YAML configuration
  --check-config FILE      validate FILE; print every error as FILE:LINE:COLUMN: key: message
  --replay FILE            first produce FILE's JSON Lines events into kafka.topic (key = id;
                           with kafka.format otlp_*: OTLP/JSON lines, key = the trace id)
  --replay-feedback FILE   then FILE's feedback events (ratings, annotations; docs/events.md)
                           into kafka.feedback_topic (key = id)
  --exit-when-idle SECONDS stop cleanly once nothing was consumed for SECONDS and nothing is
                           pending (queued, waiting for an LLM verdict, or a trace waiting in
                           the span join: up to otlp.join_timeout_ms), after the first
                           partition assignment, flushing every sink
  --version                print the version
  --help                   print this help
signals: SIGTERM/SIGINT stop cleanly (a second one ends assayd at once, exit 128+signal);
         SIGHUP reopens the JSON Lines file (logrotate) and reloads the configuration
         (sampling, log, the judges and the budget's caps, daily_limit_eur, tenants and
         apps, apply at once; kafka, the rest of budget, limits, tracking, canary, admin,
         sinks and events need a restart)
exit codes: 0 clean stop, 1 runtime failure, 2 bad configuration or arguments,
            3 stopped, but the final offset commit failed or the stop did not end within
              limits.drain_timeout_ms + 35 s (events since the last commit are consumed
              again)
)";

/// The first SIGTERM/SIGINT stops cleanly; a second one ends the process at once (exit code
/// 128 + the signal's number, as the shell reports a death by that signal): nothing more is
/// flushed or committed.
void onSignal(int sig) {
  if (!assay::requestStop()) return;
  constexpr char kMessage[] =
      "assayd: second stop signal: exiting at once, without flushing or committing\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(128 + sig);
}
void onHangup(int) { assay::requestReload(); }

/// The signal dispositions, set from the executable's .preinit_array: after the dynamic loader
/// has mapped and relocated the shared libraries (about 2 ms), before any of their static
/// initializers and before main(). A SIGHUP (reload) or SIGTERM that arrives while the
/// configuration loads, or during --check-config, is recorded for the pipeline instead of
/// ending the process by the default action (SIGHUP's is to terminate). A signal sent in the
/// first milliseconds after execve(2), before this runs, still takes the default action: under
/// systemd that cannot happen (Type=notify: `systemctl reload` waits for READY=1).
void installSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sa.sa_flags = SA_RESTART;  // a read or open(2) of a FIFO in progress goes on
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // SIGHUP reopens the JSON Lines file (logrotate) and reloads the configuration.
  struct sigaction hup {};
  hup.sa_handler = onHangup;
  hup.sa_flags = SA_RESTART;
  sigemptyset(&hup.sa_mask);
  sigaction(SIGHUP, &hup, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  // A file size limit (ulimit -f) makes write(2) fail with EFBIG, which the sinks handle; the
  // signal's default action would end the process.
  std::signal(SIGXFSZ, SIG_IGN);
}
// Only an executable may have a .preinit_array (the ELF gABI); glibc calls it before the
// shared libraries' initializers (a constructor, even at priority 101, runs after them).
__attribute__((section(".preinit_array"),
               used)) void (*const kPreinitSignals)() = installSignalHandlers;

int usageError(const std::string& message) {
  std::cerr << "assayd: " << message << "\n" << kUsage;
  return 2;
}

struct Arguments {
  std::string config_path, check_path;
  assay::RunOptions run;
};

/// Bounds a stop: once a stop is requested (or the pipeline's run ended by itself), the process
/// exits within `bound` whatever hangs (a Kafka client waiting for a coordinator that does not
/// answer held it for 10 minutes), with exit code 3: the final offset commit is not known to
/// have happened, so the events since the last commit are consumed again. The bound is
/// limits.drain_timeout_ms + 35 s, within the unit's TimeoutStopSec=60 with the default 10 s.
class StopBound {
 public:
  explicit StopBound(std::chrono::milliseconds bound)
      : bound_(bound), thread_([this] { watch(); }) {}
  ~StopBound() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  StopBound(const StopBound&) = delete;
  StopBound& operator=(const StopBound&) = delete;
  /// The run ended without a stop request (--exit-when-idle, a fatal Kafka error).
  void ended() {
    {
      std::lock_guard lock(mu_);
      ended_ = true;
    }
    cv_.notify_all();
  }

 private:
  void watch() {
    std::unique_lock lock(mu_);
    while (!done_ && !ended_ && !assay::stopRequested())
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (cv_.wait_for(lock, bound_, [this] { return done_; })) return;
    spdlog::critical(
        "shutdown did not finish within {} s of the stop (a Kafka broker or the budget store "
        "does not answer?): exiting now with code 3; the events since the last commit are "
        "consumed again",
        bound_.count() / 1000);
    spdlog::default_logger()->flush();
    ::_exit(3);
  }

  const std::chrono::milliseconds bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false, ended_ = false;
  std::thread thread_;  // last: started once the members it reads exist
};

/// Parses the command line into `out`; returns an exit code when assayd must stop now
/// (--version, --help: 0; a usage error: 2).
std::optional<int> parseArguments(int argc, char** argv, Arguments& out) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = (i + 1 < argc && a.rfind("--", 0) == 0) ? argv[i + 1] : nullptr;
    const auto take = [&](std::string& into) {
      if (!v) return false;
      into = v;
      ++i;
      return true;
    };
    if (a == "--version") {
      std::cout << "assayd " << assay::kAssayVersion << "\n";
      return 0;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--config") {
      if (!take(out.config_path)) return usageError("--config needs a FILE");
    } else if (a == "--check-config") {
      if (!take(out.check_path)) return usageError("--check-config needs a FILE");
    } else if (a == "--replay") {
      if (!take(out.run.replay_file)) return usageError("--replay needs a FILE");
    } else if (a == "--replay-feedback") {
      if (!take(out.run.replay_feedback_file)) return usageError("--replay-feedback needs a FILE");
    } else if (a == "--exit-when-idle") {
      char* end = nullptr;
      const double s = v ? std::strtod(v, &end) : -1;
      if (!v || end == v || *end != '\0' || !(s > 0 && s < 1e6))
        return usageError("--exit-when-idle needs a number of SECONDS > 0");
      out.run.exit_when_idle_s = s;
      ++i;
    } else {
      return usageError("unknown argument '" + a + "'");
    }
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (const auto code = parseArguments(argc, argv, args)) return *code;
  const std::string& config_path = args.config_path;
  const std::string& check_path = args.check_path;
  assay::RunOptions& run = args.run;

  if (!check_path.empty() && (!config_path.empty() || !run.replay_file.empty() ||
                              !run.replay_feedback_file.empty() || run.exit_when_idle_s))
    return usageError("--check-config FILE checks a file and exits: it takes no other option");
  if (!check_path.empty()) {
    // A check is a command, not the service: Ctrl-C and SIGTERM end it (SIGHUP stays caught).
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    return assay::checkConfig(check_path, std::cout, std::cerr);
  }
  if (config_path.empty()) return usageError("--config FILE is required");

  auto res = assay::loadConfigFile(config_path);
  // Printed before the logger exists: under systemd each line carries the journal's error
  // priority, so that `journalctl -p err` shows why the service did not start.
  const char* prefix = assay::stderrIsJournal() ? "<3>" : "";
  if (!res.ok()) {  // with what start-up would refuse besides: every error in one round
    for (const auto& e : assay::configErrors(res)) std::cerr << prefix << e.format() << "\n";
    return 2;
  }
  if (!res.service_errors.empty()) {  // secrets the service cannot read (--check-config warns)
    for (const auto& e : res.service_errors) std::cerr << prefix << e.format() << "\n";
    return 2;
  }
  if (!run.replay_feedback_file.empty() && res.config.kafka.feedback_topic.empty())
    return usageError("--replay-feedback needs kafka.feedback_topic in the configuration");
  for (const auto& [flag, file] : {std::pair{"--replay", run.replay_file},
                                   std::pair{"--replay-feedback", run.replay_feedback_file}})
    if (!file.empty() && !std::ifstream(file))
      return usageError(std::string(flag) + ": cannot read '" + file + "'");
  auto logger = spdlog::stderr_color_mt("assayd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(res.config.log.level));
  spdlog::set_formatter(assay::logFormatter(res.config.log.format, assay::stderrIsJournal()));

  spdlog::info("assayd {} starting with {} ({} judge{}, sampling rate {})", assay::kAssayVersion,
               config_path, res.config.judges.size(), res.config.judges.size() == 1 ? "" : "s",
               res.config.sampling.rate);
  for (auto w : res.warnings) {
    if (w.message.rfind("warning: ", 0) == 0) w.message.erase(0, 9);  // the log says it already
    spdlog::warn("{}", w.format());
  }
  // What --check-config finds beyond the loader (a property librdkafka refuses, a file that
  // cannot be read or created): configuration errors, exit 2, which systemd does not restart.
  if (const auto errors = assay::startupErrors(res.config); !errors.empty()) {
    for (const auto& e : errors) spdlog::critical("configuration error: {}", e.format());
    return 2;
  }
  // Every other failure from here on is the environment's or a component's (a port in use, a
  // fatal Kafka error): one line, exit 1, so that systemd restarts the service. A judge's
  // option that only the service's environment can tell (an unset API key variable, an
  // unreadable key file) is a configuration error: exit 2.
  try {
    StopBound bound(std::chrono::milliseconds(res.config.limits.drain_timeout_ms) +
                    std::chrono::seconds(35));
    assay::Controller controller(res.config, run);                   // the admin endpoint first
    assay::Pipeline pipeline(res.config, run, controller.wiring());  // destroyed first
    const int rc = controller.run(pipeline);
    bound.ended();
    return rc;
  } catch (const assay::ConfigurationError& e) {
    spdlog::critical("configuration error: {}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::critical("cannot run: {}", e.what());
    return 1;
  }
}
