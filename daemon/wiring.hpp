#pragma once
/// The pipeline's connections that are configuration, not flow: what the score tracker follows,
/// the redactor handed to the judge runner, the A/B experiments handed to the tracker.

#include <prometheus/registry.h>

#include <cstddef>
#include <vector>

#include "config/options.hpp"
#include "daemon/ab/ab.hpp"
#include "daemon/judge_runner.hpp"
#include "tracking/tracker.hpp"

namespace assay {

/// What the tracker follows: every configured judge's criterion and scale, in config order.
std::vector<TrackedJudge> trackedJudges(const Config& config);
/// Events that may wait for asynchronous verdicts before consumption pauses: queue_capacity,
/// plus each batch: true judge's batch_max_pending_events (its verdicts take hours).
std::size_t pendingLimit(const Config& config);
/// redact.*: the redactor and its assay_redactions_total counters, handed to the runner
/// (nothing when no detector or pattern is configured).
void connectRedaction(const Config& config, JudgeRunner& runner, prometheus::Registry& registry);
/// Hands the tracker the configured experiments' store (nothing when `ab` is null).
void connectAb(const Config& config, ab::AbService* ab, ScoreTracker& tracker);

}  // namespace assay
