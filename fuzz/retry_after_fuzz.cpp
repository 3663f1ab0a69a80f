// libFuzzer target: an HTTP Retry-After value (RFC 9110 §10.2.3) through parseRetryAfter
// (judges/llm/retry.hpp), relative to a fixed instant. Never a crash; a parsed delay is never
// negative.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "judges/llm/retry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace assay::llm;
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  const auto now = WallClock::time_point{std::chrono::seconds{1'795'959'725}};
  const auto delay = parseRetryAfter(value, now);
  if (delay && delay->count() < 0) __builtin_trap();
  return 0;
}
