#pragma once
/// The explicit table of sink types (sinks/registry.cpp), built from config.

#include <memory>
#include <vector>

#include "config/options.hpp"
#include "sinks/kafka_results_sink.hpp"
#include "sinks/sink.hpp"

namespace assay {

/// Builds every configured sink in table order. Throws std::runtime_error (start-up only).
std::vector<std::unique_ptr<Sink>> createSinks(const SinksOptions& options, const SinkContext& ctx);

}  // namespace assay
