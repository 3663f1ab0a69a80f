#include "core/judgment.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <ctime>

#include "core/json_limits.hpp"

namespace assay {

std::string formatRfc3339(std::int64_t epoch_ms) {
  std::time_t secs = static_cast<std::time_t>(epoch_ms / 1000);
  int ms = static_cast<int>(epoch_ms % 1000);
  if (ms < 0) ms += 1000, --secs;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

std::string toJson(const Judgment& j) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&](const char* key, const std::string& v) {
    w.Key(key);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("id", j.id);
  str("tenant", j.tenant);
  str("app", j.app);
  str("variant", j.variant);
  str("judged_at", formatRfc3339(j.judged_at_ms));
  if (j.backfill) {
    w.Key("backfill");
    w.Bool(true);
  }
  w.Key("verdicts");
  w.StartArray();
  for (const auto& v : j.verdicts) {
    w.StartObject();
    str("judge", v.judge);
    str("criterion", v.criterion);
    if (v.version) {
      str("judge_version", v.version->id);
      w.Key("judge_version_fields");
      w.StartObject();
      for (const auto& [name, digest] : v.version->digests) str(name.c_str(), digest);
      w.EndObject();
    }
    w.Key("score");
    if (v.verdict.score && std::isfinite(*v.verdict.score))
      w.Double(*v.verdict.score);
    else
      w.Null();
    w.Key("min");
    w.Double(v.min_score);
    w.Key("max");
    w.Double(v.max_score);
    if (v.verdict.passed) {
      w.Key("passed");
      w.Bool(*v.verdict.passed);
    }
    if (!v.verdict.evidence.empty())
      str(v.verdict.model.empty() ? "evidence" : "justification", v.verdict.evidence);
    if (!v.verdict.model.empty()) {
      str("model", v.verdict.model);
      w.Key("input_tokens");
      w.Int64(v.verdict.input_tokens);
      w.Key("output_tokens");
      w.Int64(v.verdict.output_tokens);
      w.Key("cost_eur");
      w.Double(v.verdict.cost_eur);
      if (v.verdict.contexts_truncated) {
        w.Key("contexts_truncated");
        w.Bool(true);
      }
      if (v.verdict.stored) {
        w.Key("stored");
        w.Bool(true);
      }
      if (v.verdict.tokens_estimated) {
        w.Key("tokens_estimated");
        w.Bool(true);
      }
    }
    w.Key("latency_ms");
    w.Double(std::round(v.latency_ms * 1000.0) / 1000.0);  // microsecond resolution
    if (v.verdict.outcome != Outcome::kOk)
      str("error", std::string(outcomeName(v.verdict.outcome)));
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

std::optional<JudgmentLineProblem> readJudgmentLine(std::string_view line, JudgmentRecord& out) {
  using Kind = JudgmentLineProblem::Kind;
  if (const auto shape = jsonShapeProblem(line))
    return JudgmentLineProblem{Kind::kShape, shape->message()};
  rapidjson::Document d;
  d.Parse(line.data(), line.size());
  if (d.HasParseError())
    return JudgmentLineProblem{Kind::kNotJson,
                               std::string(rapidjson::GetParseError_En(d.GetParseError())) +
                                   " at offset " + std::to_string(d.GetErrorOffset())};
  if (!d.IsObject()) return JudgmentLineProblem{Kind::kNotObject, "not a JSON object"};
  out = JudgmentRecord{};
  const auto string = [&](const rapidjson::Value& o, const char* key) -> const rapidjson::Value* {
    const auto m = o.FindMember(key);
    return m != o.MemberEnd() && m->value.IsString() ? &m->value : nullptr;
  };
  const auto number = [&](const rapidjson::Value& o, const char* key) -> std::optional<double> {
    const auto m = o.FindMember(key);
    if (m == o.MemberEnd() || !m->value.IsNumber()) return std::nullopt;
    return m->value.GetDouble();
  };
  if (const auto* id = string(d, "id")) out.id.emplace(id->GetString(), id->GetStringLength());
  if (const auto* t = string(d, "judged_at"))
    out.judged_at.emplace(t->GetString(), t->GetStringLength());
  const auto vs = d.FindMember("verdicts");
  if (vs == d.MemberEnd() || !vs->value.IsArray()) return std::nullopt;
  out.verdicts_array = true;
  for (const auto& v : vs->value.GetArray()) {
    if (!v.IsObject()) continue;
    const auto* judge = string(v, "judge");
    if (!judge) continue;
    VerdictRecord r;
    r.judge.assign(judge->GetString(), judge->GetStringLength());
    if (const auto* c = string(v, "criterion"))
      r.criterion.assign(c->GetString(), c->GetStringLength());
    r.min = number(v, "min");
    r.max = number(v, "max");
    r.score = number(v, "score");
    if (const auto* e = string(v, "error")) r.outcome.assign(e->GetString(), e->GetStringLength());
    r.has_passed = v.HasMember("passed");
    if (const auto* ver = string(v, "judge_version"))
      r.version.assign(ver->GetString(), ver->GetStringLength());
    const auto fields = v.FindMember("judge_version_fields");
    if (fields != v.MemberEnd() && fields->value.IsObject())
      for (const auto& f : fields->value.GetObject())
        if (f.value.IsString() && r.version_fields.size() < kMaxVersionFields)
          r.version_fields.emplace_back(
              std::string(f.name.GetString(), f.name.GetStringLength()),
              std::string(f.value.GetString(), f.value.GetStringLength()));
    out.verdicts.push_back(std::move(r));
  }
  return std::nullopt;
}

}  // namespace assay
