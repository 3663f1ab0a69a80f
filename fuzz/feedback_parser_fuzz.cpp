// libFuzzer target: one feedback message (docs/events.md, "Feedback events") through
// parseFeedback (tracking/tracker.hpp). Never a crash; a parsed rating is 1..5 and an
// annotation's value 0..100 with a criterion; every string is valid UTF-8 (core/utf8.hpp:
// they become label values and JSON). The first 8 bytes are also the message key.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.hpp"
#include "tracking/tracker.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  std::string error, kind;
  const auto f = assay::parseFeedback(payload, payload.substr(0, 8), error, kind);
  if (f) {
    for (const std::string* s :
         {&f->id, &f->criterion, &f->annotator, &f->experiment, &f->variant, &f->unit})
      if (!assay::isValidUtf8(*s)) __builtin_trap();
    using Kind = assay::Feedback::Kind;
    if (f->kind == Kind::kRating && (f->value < 1 || f->value > 5)) __builtin_trap();
    if (f->kind == Kind::kAnnotation && (f->value < 0 || f->value > 100 || f->criterion.empty()))
      __builtin_trap();
  } else if (error.empty()) {
    __builtin_trap();  // a refusal always says why
  }
  return 0;
}
