#include "sources/format.hpp"

#include <array>

#include "sources/json_format.hpp"
#include "sources/otlp_format.hpp"

namespace assay {
namespace {

// The format table: a new format is one file set and one row here
// (docs/adding-an-input-format.md).
// Each row's name is kEventFormatNames' (config/options.hpp), which the loader accepts.
constexpr std::array kFormats{
    InputFormatRow{EventFormat::kAssayJson, kEventFormatNames[0], &makeJsonFormat,
                   "tests/cli/data/events_small.jsonl"},
    InputFormatRow{EventFormat::kOtlpJson, kEventFormatNames[1], &makeOtlpFormat,
                   "tests/data/otlp/dev_openinference.jsonl"},
    InputFormatRow{EventFormat::kOtlpProto, kEventFormatNames[2], &makeOtlpFormat,
                   "tests/data/otlp/dev_openinference.jsonl"},
};
static_assert(kFormats.size() == std::size(kEventFormatNames));

}  // namespace

std::span<const InputFormatRow> inputFormats() { return kFormats; }

std::unique_ptr<InputFormat> makeInputFormat(const Config& config, prometheus::Registry& registry) {
  for (const auto& row : kFormats)
    if (row.format == config.kafka.format) return row.make(config, registry);
  return makeJsonFormat(config, registry);  // unreachable: the loader checked kafka.format
}

}  // namespace assay
