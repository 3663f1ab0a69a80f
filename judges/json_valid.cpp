#include "judges/json_valid.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/pointer.h>
#include <rapidjson/schema.h>
#include <rapidjson/stringbuffer.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/bounded_file.hpp"
#include "core/json_limits.hpp"

namespace assay {
namespace {
constexpr OptionSpec kJsonValidOptions[] = {
    {"schema_file", OptionType::kString,
     "path of a JSON Schema (draft-04) the answer must satisfy; default: syntax only"},
};
}  // namespace

struct JsonValidJudge::Schema {
  explicit Schema(const rapidjson::Document& d) : doc(d) {}
  rapidjson::SchemaDocument doc;  // immutable, shared by all threads; validators are per call
};

const JudgeDescriptor JsonValidJudge::kDescriptor{
    "json_valid",
    JudgeKind::kCheck,
    "format",
    0.0,
    1.0,
    kPassFailBuckets,
    kJsonValidOptions,
    CostClass::kCpuMicroseconds,
    "for expected_format json: the answer parses as JSON (and satisfies schema_file)"};

namespace {
/// A "$ref" that leads, through "$ref"s only, back to itself ({"$ref": "#"}, or a -> b -> a
/// through definitions): RapidJSON's SchemaDocument follows it until the stack runs out
/// (SIGSEGV at start-up or on a SIGHUP reload). "" when there is none. Local refs ("#…") only;
/// a recursive schema whose ref sits inside properties is fine and is not refused.
std::string refCycle(const rapidjson::Value& root) {
  std::vector<const rapidjson::Value*> stack{&root};
  while (!stack.empty()) {
    const rapidjson::Value* v = stack.back();
    stack.pop_back();
    if (v->IsArray())
      for (const auto& e : v->GetArray()) stack.push_back(&e);
    if (!v->IsObject()) continue;
    for (const auto& m : v->GetObject()) stack.push_back(&m.value);
    const rapidjson::Value* at = v;
    for (int hops = 0; hops <= 64; ++hops) {
      const auto ref = at->FindMember("$ref");
      if (ref == at->MemberEnd() || !ref->value.IsString()) break;
      const std::string target = ref->value.GetString();
      if (target.empty() || target[0] != '#') break;
      const rapidjson::Pointer pointer(target.substr(1).c_str());
      const rapidjson::Value* next = pointer.IsValid() ? pointer.Get(root) : nullptr;
      if (!next || !next->IsObject()) break;
      if (next == v || hops == 64)
        return "\"$ref\": \"" + target + "\" leads back to itself through $ref only (a cycle)";
      at = next;
    }
  }
  return "";
}

/// Largest schema_file read: 1 MiB (a schema is a few KiB).
constexpr std::size_t kMaxSchemaBytes = std::size_t{1} << 20;
}  // namespace

JsonValidJudge::JsonValidJudge(const JsonValidOptions& o) {
  if (o.schema_file.empty()) return;
  std::string text;
  if (const auto why = readRegularFile(o.schema_file, kMaxSchemaBytes, text); !why.empty())
    throw OptionError("schema_file", "'" + o.schema_file + "' " + why);
  if (const auto shape = jsonShapeProblem(text))
    throw OptionError("schema_file", "'" + o.schema_file + "': " + shape->message());
  rapidjson::Document d;
  d.Parse(text.c_str());
  if (d.HasParseError()) {
    throw OptionError("schema_file", "'" + o.schema_file + "' is not JSON (offset " +
                                         std::to_string(d.GetErrorOffset()) + ": " +
                                         rapidjson::GetParseError_En(d.GetParseError()) + ")");
  }
  if (const auto cycle = refCycle(d); !cycle.empty())
    throw OptionError("schema_file", "'" + o.schema_file + "': " + cycle);
  schema_ = std::make_unique<Schema>(d);
}

JsonValidJudge::~JsonValidJudge() = default;

std::unique_ptr<Judge> JsonValidJudge::create(const JudgeOptionValues& values) {
  return std::make_unique<JsonValidJudge>(JsonValidOptions{values.getString("schema_file", "")});
}

Verdict JsonValidJudge::judge(const Event& e) const {
  if (e.expected_format != AnswerFormat::kJson) return Verdict::fail(Outcome::kNotApplicable);
  if (const auto shape = jsonShapeProblem(e.answer))
    return Verdict::check(false, "not accepted as JSON: " + shape->message());
  rapidjson::Document d;
  d.Parse(e.answer.data(), e.answer.size());
  if (d.HasParseError()) {
    return Verdict::check(false, "not JSON at offset " + std::to_string(d.GetErrorOffset()) + ": " +
                                     rapidjson::GetParseError_En(d.GetParseError()));
  }
  if (schema_) {
    rapidjson::SchemaValidator validator(schema_->doc);
    if (!d.Accept(validator)) {
      rapidjson::StringBuffer where;
      validator.GetInvalidDocumentPointer().StringifyUriFragment(where);
      return Verdict::check(false, std::string("violates schema keyword '") +
                                       validator.GetInvalidSchemaKeyword() + "' at " +
                                       where.GetString());
    }
  }
  return Verdict::check(true);
}

}  // namespace assay
