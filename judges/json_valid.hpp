#pragma once
/// `json_valid` check: for events whose `expected_format` is "json", passes when the answer
/// parses as one JSON value (RFC 8259, RapidJSON) and, when `schema_file` is set, satisfies
/// that JSON Schema (draft-04, RapidJSON's validator). Other events: outcome `not_applicable`.

#include <memory>
#include <string>

#include "judges/judge.hpp"

namespace assay {

struct JsonValidOptions {
  std::string schema_file;  ///< path of a JSON Schema document; empty = syntax only
};

class JsonValidJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  /// Throws OptionError("schema_file") when the file is unreadable or not a JSON document.
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit JsonValidJudge(const JsonValidOptions& o);
  ~JsonValidJudge() override;
  Verdict judge(const Event& event) const override;

 private:
  struct Schema;
  std::unique_ptr<Schema> schema_;  // null without schema_file
};

}  // namespace assay
