// libFuzzer target: one Kafka message value through the event parser (sources/event_parser.hpp),
// with the default field pointers and the default 1 MB limit (its first 8 bytes also as the
// message key, the id when the event has none), then the id extractor that --replay uses. The
// parser must never crash, whatever the bytes; simdjson and RapidJSON alone agree on it; every
// string of a parsed event is valid UTF-8 (core/utf8.hpp): it leaves assay in labels, JSON Lines
// and logs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/utf8.hpp"
#include "sources/event_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const assay::EventParser parser(assay::EventFieldOptions{}, 1 << 20);
  static const assay::EventParser& thorough = *[] {
    auto* p = new assay::EventParser(assay::EventFieldOptions{}, 1 << 20);  // lives as the process
    p->setEngine(assay::EventParser::JsonEngine::kRapidJson);
    return p;
  }();
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  assay::Event event, again;
  const auto outcome = parser.parse(payload, payload.substr(0, 8), event);
  // simdjson (the default) and RapidJSON alone agree on every input: outcome, reason, detail
  // and the event.
  const auto other = thorough.parse(payload, payload.substr(0, 8), again);
  if (outcome.ok != other.ok || outcome.reason != other.reason || outcome.detail != other.detail)
    __builtin_trap();
  if (outcome.ok &&
      (event.id != again.id || event.question != again.question || event.answer != again.answer ||
       event.reference != again.reference || event.tenant != again.tenant ||
       event.contexts.size() != again.contexts.size() ||
       event.relevant_context_ids != again.relevant_context_ids))
    __builtin_trap();
  for (std::size_t i = 0; outcome.ok && i < event.contexts.size(); ++i)
    if (event.contexts[i].text != again.contexts[i].text ||
        event.contexts[i].id != again.contexts[i].id ||
        event.contexts[i].source != again.contexts[i].source)
      __builtin_trap();
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
