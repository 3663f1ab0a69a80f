// libFuzzer target: every local judge (checks, lexical, retrieval: the synchronous types of
// judges/registry.cpp, default options) on one event cut from the input. The bytes up to the
// first 0x00 are the question, up to the next the answer, then the reference, and each further
// 0x00-separated part is one context. Nothing may crash, and every verdict that scored must lie
// within its judge's range (a NaN or a score above 1 would poison the statistics).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "judges/registry.hpp"

namespace {

struct Local {
  const assay::JudgeDescriptor* descriptor;
  std::unique_ptr<assay::Judge> judge;
};

const std::vector<Local>& judges() {
  static const auto list = [] {
    std::vector<Local> out;
    for (const auto& f : assay::judgeRegistry())
      if (f.descriptor->cost != assay::CostClass::kRemoteCall)
        out.push_back({f.descriptor, f.create(assay::JudgeOptionValues{}, assay::JudgeContext{})});
    return out;
  }();
  return list;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() < 12) {
    const auto cut = rest.find('\0');
    parts.push_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  assay::Event e;
  e.id = "fuzz";
  e.question = std::string(parts[0]);
  if (parts.size() > 1) e.answer = std::string(parts[1]);
  if (parts.size() > 2) e.reference = std::string(parts[2]);
  for (std::size_t i = 3; i < parts.size(); ++i)
    e.contexts.push_back(assay::Context{std::to_string(i - 2), std::string(parts[i]), ""});
  for (const auto& [d, judge] : judges()) {
    const auto v = judge->judge(e);
    if (v.outcome == assay::Outcome::kOk && !(v.score >= d->min_score && v.score <= d->max_score))
      __builtin_trap();
  }
  return 0;
}
