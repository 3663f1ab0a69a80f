#pragma once
/// kafka.format assay_json (docs/events.md): one message, one event, read by the EventParser at
/// the configured JSON Pointers. The message key is screened before the payload is parsed: a
/// key no sampling rule can sample is finished unread.

#include <memory>

#include "sources/format.hpp"

namespace assay {

std::unique_ptr<InputFormat> makeJsonFormat(const Config& config, prometheus::Registry& registry);

}  // namespace assay
