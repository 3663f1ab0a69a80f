#include "sources/trace_mapping.hpp"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "config/options.hpp"
#include "core/json_limits.hpp"

namespace assay {

using otlp::Batch;
using otlp::Span;
using otlp::Value;

const std::vector<std::string_view>& traceMappingKeys() {
  static const std::vector<std::string_view> keys(OtlpOptions::kAttributeKeys.begin(),
                                                  OtlpOptions::kAttributeKeys.end());
  return keys;
}

std::optional<TraceMapping> builtinTraceMapping(std::string_view name) {
  TraceMapping m;
  m.tenant = "tenant.id";
  m.app = "service.name";
  m.variant = "assay.variant";
  m.reference = "assay.reference";
  if (name == "openinference") {
    m.shape = TraceMapping::Shape::kOpenInference;
    m.span_kind = "openinference.span.kind";
    m.retrieval_kinds = {"RETRIEVER"};
    m.generation_kinds = {"LLM"};
    m.query = "input.value";
    m.documents = "retrieval.documents";
    m.output_messages = "llm.output_messages";
    m.answer = "output.value";
    m.input_messages = "llm.input_messages";
    m.model = "llm.model_name";
    return m;
  }
  if (name == "gen_ai") {
    m.shape = TraceMapping::Shape::kGenAi;
    m.span_kind = "gen_ai.operation.name";
    m.retrieval_kinds = {"retrieval"};
    m.generation_kinds = {"chat", "text_completion", "generate_content"};
    m.query = "gen_ai.retrieval.query.text";
    m.documents = "gen_ai.retrieval.documents";
    m.output_messages = "gen_ai.output.messages";
    m.input_messages = "gen_ai.input.messages";
    m.model = "gen_ai.response.model";
    m.fallback_model = "gen_ai.request.model";
    return m;
  }
  return std::nullopt;
}

namespace {

std::vector<std::string> splitList(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    const auto comma = v.find(',');
    std::string_view item = v.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

bool overrideTraceMapping(TraceMapping& m, std::string_view key, std::string_view value) {
  if (value.empty()) return false;
  if (key == "retrieval_kind" || key == "generation_kind") {
    auto list = splitList(value);
    if (list.empty()) return false;
    (key == "retrieval_kind" ? m.retrieval_kinds : m.generation_kinds) = std::move(list);
    return true;
  }
  std::string* field = key == "span_kind"         ? &m.span_kind
                       : key == "query"           ? &m.query
                       : key == "documents"       ? &m.documents
                       : key == "output_messages" ? &m.output_messages
                       : key == "answer"          ? &m.answer
                       : key == "input_messages"  ? &m.input_messages
                       : key == "model"           ? &m.model
                       : key == "fallback_model"  ? &m.fallback_model
                       : key == "tenant"          ? &m.tenant
                       : key == "app"             ? &m.app
                       : key == "variant"         ? &m.variant
                       : key == "reference"       ? &m.reference
                                                  : nullptr;
  if (!field) return false;
  *field = value;
  return true;
}

std::size_t SpanParts::bytes() const {
  std::size_t n = sizeof(SpanParts) + question.size() + answer.size() + model.size() +
                  tenant.size() + app.size() + variant.size() + (reference ? reference->size() : 0);
  for (const auto& c : contexts)
    n += sizeof(Context) + c.id.size() + c.text.size() + c.source.size();
  return n;
}

namespace {

// A scalar attribute as text: strings as they are, numbers and booleans written out.
std::string scalarText(const Value& v) {
  switch (v.type) {
    case Value::Type::kString:
      return std::string(v.str);
    case Value::Type::kInt:
      return std::to_string(v.i);
    case Value::Type::kBool:
      return v.b ? "true" : "false";
    default:
      return {};
  }
}

bool isJsonMime(const Batch& b, const Span& s, std::string_view key) {
  // OpenInference: `input.value` is JSON when `input.mime_type` says so (a raw provider body).
  constexpr std::string_view kSuffix = ".value";
  if (key.size() <= kSuffix.size() || key.substr(key.size() - kSuffix.size()) != kSuffix)
    return false;
  const std::string mime = std::string(key.substr(0, key.size() - kSuffix.size())) + ".mime_type";
  const Value* m = b.find(s.attributes, mime);
  return m && m->type == Value::Type::kString && m->str.find("json") != std::string_view::npos;
}

std::string textAttribute(const Batch& b, const Span& s, std::string_view key) {
  if (key.empty()) return {};
  const Value* v = b.find(s.attributes, key);
  if (!v || isJsonMime(b, s, key)) return {};
  return scalarText(*v);
}

// Span first, then its resource.
std::string labelAttribute(const Batch& b, const Span& s, std::string_view key) {
  if (key.empty()) return {};
  if (const Value* v = b.find(s.attributes, key)) return scalarText(*v);
  if (s.resource < b.resources.size())
    if (const Value* v = b.find(b.resources[s.resource], key)) return scalarText(*v);
  return {};
}

// ---- Flattened lists (OpenInference): PREFIX.N.REST ----------------------------------------

// Calls f(N, REST, value) for every attribute `prefix.N.REST` of the span.
template <typename F>
void forEachIndexed(const Batch& b, const Span& s, std::string_view prefix, F&& f) {
  for (std::uint32_t i = s.attributes.first; i < s.attributes.first + s.attributes.count; ++i) {
    const auto& a = b.attributes[i];
    if (a.key.size() <= prefix.size() + 2 || a.key.substr(0, prefix.size()) != prefix ||
        a.key[prefix.size()] != '.')
      continue;
    const std::string_view rest = a.key.substr(prefix.size() + 1);
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '.')
      continue;
    f(n, rest.substr(static_cast<std::size_t>(end - rest.data()) + 1), a.value);
  }
}

// ---- JSON-string lists (GenAI conventions allow a JSON string instead of a structured value) --

// A view over one list element, structured (kvlist) or JSON (object).
struct Item {
  const Batch* b = nullptr;
  const Value* kv = nullptr;               // kKvList
  const rapidjson::Value* json = nullptr;  // object

  std::string text(std::string_view key) const {
    if (kv) {
      for (std::uint32_t i = kv->first; i < kv->first + kv->count; ++i)
        if (b->attributes[i].key == key) return scalarText(b->attributes[i].value);
      return {};
    }
    if (json && json->IsObject()) {
      const auto it = json->FindMember(rapidjson::StringRef(key.data(), key.size()));
      if (it == json->MemberEnd()) return {};
      if (it->value.IsString()) return {it->value.GetString(), it->value.GetStringLength()};
      if (it->value.IsInt64()) return std::to_string(it->value.GetInt64());
    }
    return {};
  }
  // The list-valued member `key` as items.
  template <typename F>
  void each(std::string_view key, F&& f) const {
    if (kv) {
      for (std::uint32_t i = kv->first; i < kv->first + kv->count; ++i) {
        const auto& a = b->attributes[i];
        if (a.key != key || a.value.type != Value::Type::kArray) continue;
        for (std::uint32_t k = a.value.first; k < a.value.first + a.value.count; ++k)
          if (b->values[k].type == Value::Type::kKvList) f(Item{b, &b->values[k], nullptr});
      }
      return;
    }
    if (json && json->IsObject()) {
      const auto it = json->FindMember(rapidjson::StringRef(key.data(), key.size()));
      if (it != json->MemberEnd() && it->value.IsArray())
        for (const auto& e : it->value.GetArray())
          if (e.IsObject()) f(Item{nullptr, nullptr, &e});
    }
  }
};

// Calls f(Item) for each element of the list attribute `key`: a structured array of key/value
// lists, or a JSON string holding an array of objects.
template <typename F>
void forEachItem(const Batch& b, const Span& s, std::string_view key, F&& f) {
  const Value* v = key.empty() ? nullptr : b.find(s.attributes, key);
  if (!v) return;
  if (v->type == Value::Type::kArray) {
    for (std::uint32_t k = v->first; k < v->first + v->count; ++k)
      if (b.values[k].type == Value::Type::kKvList) f(Item{&b, &b.values[k], nullptr});
    return;
  }
  if (v->type != Value::Type::kString || jsonShapeProblem(v->str)) return;
  rapidjson::Document d;
  d.Parse(v->str.data(), v->str.size());
  if (d.HasParseError() || !d.IsArray()) return;
  for (const auto& e : d.GetArray())
    if (e.IsObject()) f(Item{nullptr, nullptr, &e});
}

// The source of a document: a URL or name in its metadata (OpenInference keeps metadata as a
// JSON string or a key/value list).
std::string metadataSource(const Batch& b, const Value& v) {
  const auto pick = [](const Item& item) {
    for (const char* key : {"source", "url", "file_name", "file_path"})
      if (auto s = item.text(key); !s.empty()) return s;
    return std::string();
  };
  if (v.type == Value::Type::kKvList) return pick(Item{&b, &v, nullptr});
  if (v.type != Value::Type::kString || jsonShapeProblem(v.str)) return {};
  rapidjson::Document d;
  d.Parse(v.str.data(), v.str.size());
  if (d.HasParseError() || !d.IsObject()) return {};
  return pick(Item{nullptr, nullptr, &d});
}

void readDocuments(const Batch& b, const Span& s, const TraceMapping& m, SpanParts& p) {
  if (m.shape == TraceMapping::Shape::kOpenInference) {
    std::map<std::size_t, Context> by_rank;
    forEachIndexed(b, s, m.documents, [&](std::size_t n, std::string_view rest, const Value& v) {
      if (n >= kMaxTraceContexts) return;
      p.has_contexts = true;
      Context& c = by_rank[n];
      if (rest == "document.content")
        c.text = scalarText(v);
      else if (rest == "document.id")
        c.id = scalarText(v);
      else if (rest == "document.metadata")
        c.source = metadataSource(b, v);
    });
    for (auto& [n, c] : by_rank) p.contexts.push_back(std::move(c));
    return;
  }
  forEachItem(b, s, m.documents, [&](const Item& item) {
    p.has_contexts = true;
    if (p.contexts.size() >= kMaxTraceContexts) return;
    Context c;
    c.id = item.text("id");
    c.text = item.text("content");
    for (const char* key : {"source", "url", "source_id"})
      if (c.source.empty()) c.source = item.text(key);
    p.contexts.push_back(std::move(c));
  });
  if (const Value* v = b.find(s.attributes, m.documents); v) p.has_contexts = true;
}

// The text of the last message with `role` (any role when none says one) in a message list.
std::string lastMessage(const Batch& b, const Span& s, const TraceMapping& m, std::string_view list,
                        std::string_view role) {
  if (list.empty()) return {};
  if (m.shape == TraceMapping::Shape::kOpenInference) {
    std::map<std::size_t, std::pair<std::string, std::string>> by_index;  // role, content
    forEachIndexed(b, s, list, [&](std::size_t n, std::string_view rest, const Value& v) {
      if (rest == "message.role")
        by_index[n].first = scalarText(v);
      else if (rest == "message.content")
        by_index[n].second = scalarText(v);
    });
    std::string out;
    for (const auto& [n, rc] : by_index)
      if ((rc.first.empty() || rc.first == role) && !rc.second.empty()) out = rc.second;
    return out;
  }
  std::string out;
  forEachItem(b, s, list, [&](const Item& message) {
    const std::string r = message.text("role");
    if (!r.empty() && r != role) return;
    std::string text;
    message.each("parts", [&](const Item& part) {
      const std::string type = part.text("type");
      if (!type.empty() && type != "text") return;
      const std::string content = part.text("content");
      if (content.empty()) return;
      if (!text.empty()) text += "\n";
      text += content;
    });
    if (text.empty()) text = message.text("content");  // an older flat shape
    if (!text.empty()) out = std::move(text);
  });
  return out;
}

bool oneOf(const std::string& v, const std::vector<std::string>& list) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

}  // namespace

SpanParts extractSpanParts(const Batch& b, const Span& s, const TraceMapping& m) {
  SpanParts p;
  const std::string kind = textAttribute(b, s, m.span_kind);
  if (oneOf(kind, m.retrieval_kinds)) {
    p.role = SpanParts::Role::kRetrieval;
    p.question = textAttribute(b, s, m.query);
    readDocuments(b, s, m, p);
  } else if (oneOf(kind, m.generation_kinds)) {
    p.role = SpanParts::Role::kGeneration;
    p.answer = lastMessage(b, s, m, m.output_messages, "assistant");
    if (p.answer.empty()) p.answer = textAttribute(b, s, m.answer);
    p.question = lastMessage(b, s, m, m.input_messages, "user");
    p.model = textAttribute(b, s, m.model);
    if (p.model.empty()) p.model = textAttribute(b, s, m.fallback_model);
  } else if (s.root) {
    p.question = textAttribute(b, s, m.query);  // OpenInference: the chain's input
  }
  p.tenant = labelAttribute(b, s, m.tenant);
  p.app = labelAttribute(b, s, m.app);
  p.variant = labelAttribute(b, s, m.variant);
  if (!m.reference.empty())
    if (const Value* v = b.find(s.attributes, m.reference); v && v->type == Value::Type::kString)
      p.reference = std::string(v->str);
  return p;
}

}  // namespace assay
