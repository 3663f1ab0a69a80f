#pragma once
/// The explicit table of every judge type (judges/registry.cpp). Config resolves a judge entry's
/// `kind` + `check:`/`metric:` here; the compliance test walks the whole table.

#include <memory>
#include <span>
#include <string_view>

#include "judges/judge.hpp"

namespace assay {

struct JudgeFactory {
  const JudgeDescriptor* descriptor;
  /// Builds a judge from already type-checked option values; throws OptionError on bad values.
  /// With `context.services == nullptr` (checking a configuration) a judge that needs the
  /// services only checks its options and returns nullptr.
  std::unique_ptr<Judge> (*create)(const JudgeOptionValues& values, const JudgeContext& context);
  /// The criterion and scale of a judge with these (valid) options.
  JudgeInfo (*info)(const JudgeOptionValues& values);
};

std::span<const JudgeFactory> judgeRegistry();

/// nullptr when no judge of that kind has that type name.
const JudgeFactory* findJudgeFactory(JudgeKind kind, std::string_view type);

/// The config key naming a judge's type for `kind` ("check", "metric"), or nullptr for a kind
/// with a single type and no type key (llm).
const char* judgeTypeKey(JudgeKind kind);

}  // namespace assay
