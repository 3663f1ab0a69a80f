#pragma once
/// The daemon: assembles the whole pipeline from a validated Config and runs it until a signal,
/// or until idle with --exit-when-idle. Read daemon.cpp top-down to see the flow:
/// Kafka → parse-free sampling → bounded queue → judge workers → sinks → offsets.

#include <optional>
#include <string>

#include "config/options.hpp"

namespace assay {

struct RunOptions {
  std::string replay_file;           ///< --replay: produce this JSON Lines file first
  std::string replay_feedback_file;  ///< --replay-feedback: into kafka.feedback_topic, key = id
  std::optional<double> exit_when_idle_s;  ///< --exit-when-idle SECONDS
};

/// Returns the process exit code: 0 clean stop, 1 runtime failure (logged).
int runDaemon(const Config& config, const RunOptions& run);

/// Asks a running daemon to stop (async-signal-safe; used by the signal handler).
void requestStop();

}  // namespace assay
