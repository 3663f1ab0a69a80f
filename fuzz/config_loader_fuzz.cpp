// libFuzzer target: a configuration file (docs/configuration.md) through loadConfigString
// (config/loader.hpp), which never throws: a bad file is a list of errors. Never a crash; a
// file that loads without errors has valid ranges where the daemon relies on them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  const auto result = assay::loadConfigString(yaml, "fuzz.yaml");
  if (result.ok()) {
    const auto& c = result.config;
    if (!(c.sampling.rate >= 0.0 && c.sampling.rate <= 1.0)) __builtin_trap();
    if (c.limits.workers < 1 || c.limits.workers > 64) __builtin_trap();
  }
  return 0;
}
