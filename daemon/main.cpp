// assayd: watches the quality of a RAG service from its Kafka events (CONTRACT.md §4).

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

#include "config/loader.hpp"
#include "daemon/daemon.hpp"
#include "daemon/version.hpp"
#include "judges/tracking/tracker.hpp"

namespace {

constexpr const char* kUsage =
    R"(usage: assayd --config FILE [--replay EVENTS.jsonl] [--replay-feedback FEEDBACK.jsonl]
                     [--exit-when-idle SECONDS]
       assayd --check-config FILE
       assayd --version

  --config FILE            run the daemon with this YAML configuration
  --check-config FILE      validate FILE; print every error as FILE:LINE:COLUMN: key: message
  --replay FILE            first produce FILE's JSON Lines events into kafka.topic (key = id)
  --replay-feedback FILE   then FILE's feedback events (ratings, annotations; docs/events.md)
                           into kafka.feedback_topic (key = id)
  --exit-when-idle SECONDS stop cleanly once nothing was consumed for SECONDS, after the first
                           partition assignment, flushing every sink
  --version                print the version
  --help                   print this help
exit codes: 0 clean stop, 1 runtime failure, 2 bad configuration or arguments
)";

void onSignal(int) { assay::requestStop(); }

int usageError(const std::string& message) {
  std::cerr << "assayd: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, check_path;
  assay::RunOptions run;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)flag;
      return argv[++i];
    };
    if (a == "--version") {
      std::cout << "assayd " << assay::kAssayVersion << "\n";
      return 0;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--config") {
      const char* v = value("--config");
      if (!v) return usageError("--config needs a FILE");
      config_path = v;
    } else if (a == "--check-config") {
      const char* v = value("--check-config");
      if (!v) return usageError("--check-config needs a FILE");
      check_path = v;
    } else if (a == "--replay") {
      const char* v = value("--replay");
      if (!v) return usageError("--replay needs a FILE");
      run.replay_file = v;
    } else if (a == "--replay-feedback") {
      const char* v = value("--replay-feedback");
      if (!v) return usageError("--replay-feedback needs a FILE");
      run.replay_feedback_file = v;
    } else if (a == "--exit-when-idle") {
      const char* v = value("--exit-when-idle");
      char* end = nullptr;
      const double s = v ? std::strtod(v, &end) : -1;
      if (!v || end == v || *end != '\0' || !(s > 0 && s < 1e6))
        return usageError("--exit-when-idle needs a number of SECONDS > 0");
      run.exit_when_idle_s = s;
    } else {
      return usageError("unknown argument '" + a + "'");
    }
  }

  if (!check_path.empty()) {
    const auto res = assay::loadConfigFile(check_path);
    for (const auto& e : res.errors) std::cerr << e.format() << "\n";
    for (const auto& w : res.warnings) std::cerr << w.format() << "\n";
    if (!res.ok()) return 2;
    for (std::size_t i = 0; i < res.config.judges.size(); ++i) {
      const auto& env = res.config.judges[i].llm_options.api_key_env;
      if (res.config.judges[i].llm && !env.empty() && !std::getenv(env.c_str()))
        std::cerr << check_path << ": judges[" << i << "].api_key_env: warning: " << env
                  << " is not set in this environment; assayd refuses to start without it\n";
    }
    if (const auto& t = res.config.tracking; !t.baseline_file.empty()) {
      try {  // the file's content, as the daemon will read it
        (void)assay::loadBaselineScores(t.baseline_file, std::nullopt, std::nullopt);
      } catch (const std::exception& e) {
        std::cerr << check_path << ": tracking.baseline_file: " << e.what() << "\n";
        return 2;
      }
    }
    std::cout << check_path << ": OK (" << res.config.judges.size() << " judges)\n";
    return 0;
  }
  if (config_path.empty()) return usageError("--config FILE is required");

  auto res = assay::loadConfigFile(config_path);
  if (!res.ok()) {
    for (const auto& e : res.errors) std::cerr << e.format() << "\n";
    return 2;
  }
  auto logger = spdlog::stderr_color_mt("assayd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(res.config.log.level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  spdlog::info("assayd {} starting with {} ({} judges, sampling rate {})", assay::kAssayVersion,
               config_path, res.config.judges.size(), res.config.sampling.rate);
  for (const auto& w : res.warnings) spdlog::warn("{}", w.format());
  try {
    return assay::runDaemon(res.config, run);
  } catch (const assay::ConfigurationError& e) {
    spdlog::critical("{}", e.what());  // e.g. a Kafka property librdkafka rejects
    return 2;
  } catch (const std::exception& e) {
    // The environment failed us (port in use, unwritable file, broker rejected the replay):
    // exit 1, so systemd restarts the service.
    spdlog::critical("{}", e.what());
    return 1;
  }
}
