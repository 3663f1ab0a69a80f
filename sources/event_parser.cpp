#include "sources/event_parser.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <simdjson.h>

#include "core/json_limits.hpp"
#include "core/utf8.hpp"

namespace assay {

std::string_view invalidReasonName(InvalidReason r) {
  switch (r) {
    case InvalidReason::kNotJson:
      return "not_json";
    case InvalidReason::kNotUtf8:
      return "not_utf8";
    case InvalidReason::kMissingField:
      return "missing_field";
    case InvalidReason::kWrongType:
      return "wrong_type";
    case InvalidReason::kTooLarge:
      return "too_large";
    case InvalidReason::kTooDeep:
      return "too_deep";
    case InvalidReason::kCount_:
      break;
  }
  return "unknown";
}

namespace {

using rapidjson::Pointer;
using rapidjson::Value;

struct FieldError {
  InvalidReason reason;
  std::string detail;
};

std::string str(const Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

/// `contexts`: strings, or objects {text, id?, source?}.
std::optional<ParseOutcome> readContexts(const Value& v, const std::string& path,
                                         std::vector<Context>& out) {
  const auto wrong = [](std::string detail) {
    return ParseOutcome{false, InvalidReason::kWrongType, std::move(detail)};
  };
  if (!v.IsArray()) return wrong(path + ": expected an array");
  out.reserve(v.Size());
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const Value& c = v[i];
    const std::string where = path + "/" + std::to_string(i);
    Context ctx;
    if (c.IsString()) {
      ctx.text = str(c);
    } else if (c.IsObject()) {
      auto text = c.FindMember("text");
      if (text == c.MemberEnd() || !text->value.IsString())
        return wrong(where + "/text: expected a string");
      ctx.text = str(text->value);
      if (auto id = c.FindMember("id"); id != c.MemberEnd()) {
        if (id->value.IsString())
          ctx.id = str(id->value);
        else if (id->value.IsInt64())
          ctx.id = std::to_string(id->value.GetInt64());
        else if (!id->value.IsNull())
          return wrong(where + "/id: expected a string");
      }
      if (auto src = c.FindMember("source"); src != c.MemberEnd() && src->value.IsString())
        ctx.source = str(src->value);
    } else {
      return wrong(where + ": expected a string or {id, text}");
    }
    out.push_back(std::move(ctx));
  }
  return std::nullopt;
}

/// `relevant_context_ids`: strings (integers read as their decimal text).
std::optional<ParseOutcome> readIds(const Value& v, const std::string& path,
                                    std::optional<std::vector<std::string>>& out) {
  const ParseOutcome wrong{false, InvalidReason::kWrongType,
                           path + ": expected an array of strings"};
  if (!v.IsArray()) return wrong;
  std::vector<std::string> ids;
  for (const auto& x : v.GetArray()) {
    if (x.IsString())
      ids.push_back(str(x));
    else if (x.IsInt64())
      ids.push_back(std::to_string(x.GetInt64()));
    else
      return wrong;
  }
  out = std::move(ids);
  return std::nullopt;
}

}  // namespace

struct EventParser::Pointers {
  struct Field {
    std::string path;
    Pointer ptr;
    explicit Field(const std::string& p)
        : path(p), ptr(p.empty() ? "" : p.c_str()), fast(fastPointer(p)) {}
    bool enabled() const { return !path.empty(); }
    /// simdjson reads this pointer as RapidJSON does. Not so for a segment of 20 digits or
    /// more: simdjson 3.0's array index wraps past 2^64 (RapidJSON finds no such element).
    bool fast = true;
    static bool fastPointer(std::string_view p) {
      std::size_t digits = 0;
      for (const char c : p) {
        digits = c >= '0' && c <= '9' ? digits + 1 : 0;
        if (digits >= 20) return false;
      }
      return true;
    }
    /// The value, or nullptr when absent (or null).
    const Value* get(const Value& root) const {
      if (!enabled()) return nullptr;
      const Value* v = ptr.Get(root);
      return (v && !v->IsNull()) ? v : nullptr;
    }
  };
  explicit Pointers(const EventFieldOptions& f)
      : id(f.id),
        timestamp(f.timestamp),
        tenant(f.tenant),
        app(f.app),
        variant(f.variant),
        model(f.model),
        question(f.question),
        contexts(f.contexts),
        answer(f.answer),
        reference(f.reference),
        relevant(f.relevant_context_ids),
        expected_format(f.expected_format) {
    for (const auto& x : f.extra)
      if (!x.empty()) extra.emplace_back(x);
  }
  Field id, timestamp, tenant, app, variant, model, question, contexts, answer, reference, relevant,
      expected_format;
  std::vector<Field> extra;

  /// simdjson's side: the value at `f`'s pointer in `root`; `absent` when there is none (or it
  /// is null). false when simdjson cannot say as RapidJSON would (a pointer it reads
  /// otherwise): the thorough path decides.
  static bool at(const Field& f, const simdjson::dom::element& root, simdjson::dom::element& v,
                 bool& absent) {
    absent = true;
    if (!f.enabled()) return true;
    if (!f.fast) return false;
    const auto err = root.at_pointer(f.path).get(v);
    if (err == simdjson::NO_SUCH_FIELD) return true;
    if (err) return false;
    absent = v.is_null();
    return true;
  }
  /// A string field: copied to `dst` when present; false when present and not a string.
  static bool string(const Field& f, const simdjson::dom::element& root, std::string& dst) {
    simdjson::dom::element v;
    bool absent = true;
    if (!at(f, root, v, absent)) return false;
    if (absent) return true;
    std::string_view sv;
    if (v.get_string().get(sv)) return false;
    dst.assign(sv);
    return true;
  }
  static bool required(const Field& f, const simdjson::dom::element& root, std::string& dst) {
    simdjson::dom::element v;
    bool absent = true;
    std::string_view sv;
    if (!at(f, root, v, absent) || absent || v.get_string().get(sv)) return false;
    dst.assign(sv);
    return true;
  }
  bool contextsOf(const simdjson::dom::element& root, std::vector<Context>& out) const;
  bool idsOf(const simdjson::dom::element& root,
             std::optional<std::vector<std::string>>& out) const;
  /// Fills `out` from a parsed event when every field is as the thorough path accepts it;
  /// false otherwise (the thorough path then gives the reason).
  bool fill(const simdjson::dom::element& root, std::string_view fallback_id, Event& out) const;
};

namespace {

/// An id: a string as it is, an integer as RapidJSON's IsInt64 reads it (its decimal text);
/// false for anything else.
bool idText(const simdjson::dom::element& v, std::string& dst) {
  std::string_view sv;
  if (v.get_string().get(sv) == simdjson::SUCCESS) {
    dst.assign(sv);
    return true;
  }
  int64_t i = 0;
  if (v.get_int64().get(i)) return false;
  dst = std::to_string(i);
  return true;
}

}  // namespace

bool EventParser::Pointers::contextsOf(const simdjson::dom::element& root,
                                       std::vector<Context>& out) const {
  simdjson::dom::element v;
  bool absent = true;
  if (!at(contexts, root, v, absent)) return false;
  if (absent) return true;
  simdjson::dom::array items;
  if (v.get_array().get(items)) return false;
  out.reserve(items.size());
  for (const auto c : items) {
    Context ctx;
    std::string_view sv;
    if (c.get_string().get(sv) == simdjson::SUCCESS) {
      ctx.text.assign(sv);
    } else {
      simdjson::dom::object o;
      if (c.get_object().get(o)) return false;
      simdjson::dom::element text, id, src;
      if (o.at_key("text").get(text) || text.get_string().get(sv)) return false;
      ctx.text.assign(sv);
      if (o.at_key("id").get(id) == simdjson::SUCCESS && !id.is_null() && !idText(id, ctx.id))
        return false;
      if (o.at_key("source").get(src) == simdjson::SUCCESS &&
          src.get_string().get(sv) == simdjson::SUCCESS)
        ctx.source.assign(sv);
    }
    out.push_back(std::move(ctx));
  }
  return true;
}

bool EventParser::Pointers::idsOf(const simdjson::dom::element& root,
                                  std::optional<std::vector<std::string>>& out) const {
  simdjson::dom::element v;
  bool absent = true;
  if (!at(relevant, root, v, absent)) return false;
  if (absent) return true;
  simdjson::dom::array items;
  if (v.get_array().get(items)) return false;
  std::vector<std::string> ids;
  ids.reserve(items.size());
  for (const auto x : items)
    if (!idText(x, ids.emplace_back())) return false;
  out = std::move(ids);
  return true;
}

bool EventParser::Pointers::fill(const simdjson::dom::element& root, std::string_view fallback_id,
                                 Event& out) const {
  Event e;
  if (!required(question, root, e.question) || !required(answer, root, e.answer)) return false;
  simdjson::dom::element v;
  bool absent = true;
  if (!at(id, root, v, absent)) return false;
  if (!absent && !idText(v, e.id)) return false;
  if (e.id.empty()) {
    if (!isValidUtf8(fallback_id)) return false;
    e.id.assign(fallback_id);
  }
  if (!string(tenant, root, e.tenant) || !string(app, root, e.app) ||
      !string(variant, root, e.variant) || !string(model, root, e.model))
    return false;
  if (!at(timestamp, root, v, absent) || (!absent && !v.is_string() && !v.is_number()))
    return false;
  if (!at(reference, root, v, absent)) return false;
  if (!absent) {
    std::string_view sv;
    if (v.get_string().get(sv)) return false;
    e.reference.emplace(sv);
  }
  if (!at(expected_format, root, v, absent)) return false;
  if (!absent) {
    std::string_view sv;
    if (v.get_string().get(sv) || (sv != "json" && sv != "text")) return false;
    if (sv == "json") e.expected_format = AnswerFormat::kJson;
  }
  if (!contextsOf(root, e.contexts) || !idsOf(root, e.relevant_context_ids)) return false;
  for (const auto& f : extra) {
    if (!at(f, root, v, absent)) return false;
    if (absent) continue;
    std::string_view sv;
    // Another value goes out as RapidJSON writes it: the thorough path.
    if (v.get_string().get(sv)) return false;
    e.fields.emplace_back(f.path, std::string(sv));
  }
  out = std::move(e);
  return true;
}

EventParser::EventParser(const EventFieldOptions& fields, std::size_t max_event_bytes)
    : p_(std::make_unique<Pointers>(fields)), max_event_bytes_(max_event_bytes) {}

EventParser::~EventParser() = default;

void EventParser::setExtra(const std::vector<std::string>& pointers) {
  p_->extra.clear();
  for (const auto& x : pointers)
    if (!x.empty()) p_->extra.emplace_back(x);
}

std::string EventParser::extractId(std::string_view payload) const {
  if (jsonShapeProblem(payload)) return {};
  rapidjson::Document d;
  d.Parse(payload.data(), payload.size());
  if (d.HasParseError() || !d.IsObject()) return {};
  const Value* v = p_->id.get(d);
  if (v && v->IsString()) return str(*v);
  if (v && v->IsInt64()) return std::to_string(v->GetInt64());
  return {};
}

ParseOutcome EventParser::parse(std::string_view payload, std::string_view fallback_id,
                                Event& out) const {
  if (payload.size() > max_event_bytes_) {
    return {false, InvalidReason::kTooLarge,
            std::to_string(payload.size()) + " bytes > max_event_bytes " +
                std::to_string(max_event_bytes_)};
  }
  if (engine_ == JsonEngine::kSimdjson && parseFast(payload, fallback_id, out))
    return {true, InvalidReason::kNotJson, {}};
  return parseThorough(payload, fallback_id, out);
}

namespace {

/// Whether `s` holds a run of kLongRun digits or more. RapidJSON refuses a number whose integer
/// part passes about 1.8e308 before its exponent applies ("1" + 400 zeros + "e-300"), which
/// simdjson accepts: such a message goes the thorough way. A run that long covers a multiple of
/// kLongRun, so only those bytes are looked at first: size / 256 reads for an ordinary event.
bool longDigitRun(std::string_view s) {
  constexpr std::size_t kLongRun = 256;  // below the 309 digits RapidJSON refuses
  const auto digit = [&](std::size_t i) { return s[i] >= '0' && s[i] <= '9'; };
  for (std::size_t at = 0; at < s.size(); at += kLongRun) {
    if (!digit(at)) continue;
    std::size_t begin = at, end = at + 1;
    while (begin > 0 && digit(begin - 1)) --begin;
    while (end < s.size() && digit(end)) ++end;
    if (end - begin >= kLongRun) return true;
  }
  return false;
}

}  // namespace

bool EventParser::parseFast(std::string_view payload, std::string_view fallback_id,
                            Event& out) const {
  // simdjson checks UTF-8, depth (at most kMaxJsonDepth, as jsonShapeProblem), unescaped
  // control characters and surrogate escapes; a NUL byte after the document it would accept.
  if (payload.size() > kFastPathMaxBytes || payload.find('\0') != std::string_view::npos ||
      longDigitRun(payload))
    return false;
  struct Scratch {
    simdjson::dom::parser parser;
    std::string padded;
    bool ready = false;
  };
  thread_local Scratch scratch;
  if (!scratch.ready) {
    if (scratch.parser.allocate(kFastPathMaxBytes, kMaxJsonDepth) != simdjson::SUCCESS)
      return false;
    scratch.padded.reserve(kFastPathMaxBytes + simdjson::SIMDJSON_PADDING);
    scratch.ready = true;
  }
  scratch.padded.assign(payload);
  scratch.padded.append(simdjson::SIMDJSON_PADDING, ' ');
  simdjson::dom::element root;
  if (scratch.parser.parse(scratch.padded.data(), payload.size(), false).get(root) ||
      !root.is_object())
    return false;
  return p_->fill(root, fallback_id, out);
}

ParseOutcome EventParser::parseThorough(std::string_view payload, std::string_view fallback_id,
                                        Event& out) const {
  if (const auto shape = jsonShapeProblem(payload)) {
    using Kind = JsonShapeProblem::Kind;
    return {false,
            shape->kind == Kind::kTooDeep   ? InvalidReason::kTooDeep
            : shape->kind == Kind::kNotUtf8 ? InvalidReason::kNotUtf8
                                            : InvalidReason::kNotJson,
            shape->message()};
  }
  rapidjson::Document d;
  d.Parse(payload.data(), payload.size());
  if (d.HasParseError()) {
    return {false, InvalidReason::kNotJson,
            std::string(rapidjson::GetParseError_En(d.GetParseError())) + " (at byte " +
                std::to_string(d.GetErrorOffset()) + " of the message)"};
  }
  if (!d.IsObject()) return {false, InvalidReason::kNotJson, "top-level value is not an object"};

  auto optString = [&](const Pointers::Field& f, std::string& dst) -> std::optional<FieldError> {
    const Value* v = f.get(d);
    if (!v) return std::nullopt;
    if (!v->IsString())
      return FieldError{InvalidReason::kWrongType, f.path + ": expected a string"};
    dst = str(*v);
    return std::nullopt;
  };
  auto fail = [](const FieldError& e) { return ParseOutcome{false, e.reason, e.detail}; };

  Event e;
  for (const auto* f : {&p_->question, &p_->answer}) {
    const Value* v = f->get(d);
    if (!v) return {false, InvalidReason::kMissingField, f->path + " is missing or null"};
    if (!v->IsString()) return {false, InvalidReason::kWrongType, f->path + ": expected a string"};
  }
  e.question = str(*p_->question.get(d));
  e.answer = str(*p_->answer.get(d));

  if (const Value* v = p_->id.get(d)) {
    if (v->IsString())
      e.id = str(*v);
    else if (v->IsInt64())
      e.id = std::to_string(v->GetInt64());
    else
      return {false, InvalidReason::kWrongType, p_->id.path + ": expected a string or an integer"};
  }
  if (e.id.empty()) {
    // The Kafka key is bytes, not text: as an id it leaves in every judgment and log line.
    if (!isValidUtf8(fallback_id))
      return {false, InvalidReason::kNotUtf8,
              "no id field, and the message key (the id then) is not valid UTF-8 (at byte " +
                  std::to_string(firstInvalidUtf8(fallback_id)) + ")"};
    e.id = std::string(fallback_id);
  }
  if (auto err = optString(p_->tenant, e.tenant)) return fail(*err);
  if (auto err = optString(p_->app, e.app)) return fail(*err);
  if (auto err = optString(p_->variant, e.variant)) return fail(*err);
  if (auto err = optString(p_->model, e.model)) return fail(*err);
  if (const Value* v = p_->timestamp.get(d); v && !v->IsString() && !v->IsNumber()) {
    return {false, InvalidReason::kWrongType,
            p_->timestamp.path + ": expected an RFC 3339 string or epoch milliseconds"};
  }
  if (const Value* v = p_->reference.get(d)) {
    if (!v->IsString())
      return {false, InvalidReason::kWrongType, p_->reference.path + ": expected a string"};
    e.reference = str(*v);
  }
  if (const Value* v = p_->expected_format.get(d)) {
    const std::string f = v->IsString() ? str(*v) : "";
    if (f == "json")
      e.expected_format = AnswerFormat::kJson;
    else if (f != "text")
      return {false, InvalidReason::kWrongType,
              p_->expected_format.path + ": expected \"text\" or \"json\""};
  }
  if (const Value* v = p_->contexts.get(d))
    if (auto err = readContexts(*v, p_->contexts.path, e.contexts)) return *err;
  if (const Value* v = p_->relevant.get(d))
    if (auto err = readIds(*v, p_->relevant.path, e.relevant_context_ids)) return *err;
  for (const auto& f : p_->extra) {
    const Value* v = f.get(d);
    if (!v) continue;
    if (v->IsString()) {
      e.fields.emplace_back(f.path, str(*v));
      continue;
    }
    rapidjson::StringBuffer buf;  // bounded by the payload, already at most max_event_bytes
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    v->Accept(w);
    e.fields.emplace_back(f.path, std::string(buf.GetString(), buf.GetSize()));
  }
  out = std::move(e);
  return {true, InvalidReason::kNotJson, {}};
}

}  // namespace assay
