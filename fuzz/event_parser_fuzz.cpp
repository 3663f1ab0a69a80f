// libFuzzer target: one Kafka message value through the event parser (sources/event_parser.hpp),
// with the default field pointers and the default 1 MB limit (its first 8 bytes also as the
// message key, the id when the event has none), then the id extractor that --replay uses. The
// parser must never crash, whatever the bytes; every string of a parsed event is valid UTF-8
// (core/utf8.hpp): it leaves assay in labels, JSON Lines and logs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/utf8.hpp"
#include "sources/event_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const assay::EventParser parser(assay::EventFieldOptions{}, 1 << 20);
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  assay::Event event;
  const auto outcome = parser.parse(payload, payload.substr(0, 8), event);
  if (outcome.ok) {
    if (event.id.empty()) __builtin_trap();  // an event always has an id
    bool utf8 = true;
    for (const std::string* s : {&event.id, &event.tenant, &event.app, &event.variant, &event.model,
                                 &event.question, &event.answer})
      utf8 = utf8 && assay::isValidUtf8(*s);
    for (const auto& c : event.contexts)
      utf8 = utf8 && assay::isValidUtf8(c.text) && assay::isValidUtf8(c.id) &&
             assay::isValidUtf8(c.source);
    if (event.reference) utf8 = utf8 && assay::isValidUtf8(*event.reference);
    if (event.relevant_context_ids)
      for (const auto& id : *event.relevant_context_ids) utf8 = utf8 && assay::isValidUtf8(id);
    if (!utf8) __builtin_trap();
  }
  (void)parser.extractId(payload);
  return 0;
}
