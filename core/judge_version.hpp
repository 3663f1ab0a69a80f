#pragma once
/// A configured judge's version (docs/judge-versions.md): a short hash of what can
/// change its scores, and the fields it is computed from, so that a change can say what
/// changed. judges/judge.hpp (judgeVersionOf) computes it from a judge's type and options.

#include <string>
#include <utility>
#include <vector>

namespace assay {

struct JudgeVersion {
  /// 12 lower-case hex digits (the upper 48 bits of XXH3-64 over every field as
  /// `name=value;`, in order); "" for a judge built without one (tests).
  std::string id;
  /// name → canonical value text, in order: `type`, `kind`, `template` (the descriptor's
  /// version_salt: the version of the type's scoring code or prompt template), then each
  /// scoring option set in the configuration (an option left at its default is part of the
  /// type's code, which `template` covers).
  std::vector<std::pair<std::string, std::string>> fields;
  /// `fields` as written in every judgment (`judge_version_fields`): name → 4 lower-case hex
  /// digits of XXH3-64 of the value (a different value shows as a different digest with
  /// probability 1 − 2⁻¹⁶), in the same order. Set by make().
  std::vector<std::pair<std::string, std::string>> digests;

  /// The version of `fields`: computes id and digests.
  static JudgeVersion make(std::vector<std::pair<std::string, std::string>> fields);
};

/// The names of the fields whose values differ between two versions' fields or digests (a
/// field present on one side only counts), in the order of `to` then the ones `to` lacks.
std::vector<std::string> changedFields(const std::vector<std::pair<std::string, std::string>>& from,
                                       const std::vector<std::pair<std::string, std::string>>& to);

}  // namespace assay
