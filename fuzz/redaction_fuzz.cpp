// libFuzzer target: every built-in redaction detector and a user pattern over arbitrary text
// (judges/redaction.hpp). Nothing may crash, an event redacted twice through one session
// keeps its numbering (the same value gives the same placeholder both times), and valid UTF-8
// stays valid (a match mapped back from the normalized copy never splits a character).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.hpp"
#include "judges/redaction.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const assay::Redactor redactor([] {
    assay::RedactOptions o;
    o.detectors = {"email", "phone", "card", "iban", "ip", "token"};
    o.patterns = {{"ticket", "TCK-[0-9]{4,8}"}};
    return o;
  }());
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  assay::Redactor::Session s(redactor);
  const std::string once = s.apply(text);
  const std::string twice = s.apply(text);
  if (once != twice) __builtin_trap();
  if (assay::firstInvalidUtf8(text) == text.size() && assay::firstInvalidUtf8(once) != once.size())
    __builtin_trap();
  return 0;
}
