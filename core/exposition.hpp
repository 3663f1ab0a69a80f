#pragma once
/// The Prometheus text exposition of a registry (format 0.0.4), served on /metrics.

#include <prometheus/registry.h>

#include <string>

namespace assay {

std::string serializeMetrics(const prometheus::Registry& registry);

}  // namespace assay
