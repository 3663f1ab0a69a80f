#include "judges/llm/provider.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>
#include <string_view>

#include "core/json_limits.hpp"
#include "judges/llm/json_text.hpp"

namespace assay::llm {
namespace {

void str(rapidjson::Writer<rapidjson::StringBuffer>& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

std::string trimSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

std::string endpointUrl(std::string_view endpoint, std::string_view path) {
  const std::size_t q = endpoint.find('?');
  const std::string base = trimSlash(std::string(endpoint.substr(0, q)));
  const std::string query = q == std::string_view::npos ? "" : std::string(endpoint.substr(q));
  if (path == "/messages")  // Anthropic: "/v1/messages" unless the endpoint ends in /v1
    return (base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0
                ? base + "/messages"
                : base + "/v1/messages") +
           query;
  return base + std::string(path) + query;
}

namespace {

constexpr std::size_t kMaxErrorMessage = 300;
constexpr std::size_t kMaxStreamEvents = 200'000;

/// `s` cut to at most `max` bytes, never inside a UTF-8 sequence.
/// Longest error type kept: the APIs' longest is under 40 bytes ("invalid_request_error/
/// context_length_exceeded" is 45).
constexpr std::size_t kMaxErrorType = 80;

std::string clip(std::string s, std::size_t max = kMaxErrorMessage) {
  if (s.size() <= max) return s;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s + "…";
}

/// A string, or an integer written in decimal; "" for anything else.
std::string scalarText(const rapidjson::Value& v) {
  if (v.IsString()) return {v.GetString(), v.GetStringLength()};
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  return {};
}

std::string member(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject()) return {};
  auto it = v.FindMember(key);
  return it == v.MemberEnd() ? std::string() : scalarText(it->value);
}

/// A JSON object of valid UTF-8 within the nesting bound, or false.
bool parseObject(std::string_view text, rapidjson::Document& d) {
  // Too deep, a NUL byte, or not UTF-8 (checked there: RapidJSON's own encoding check, a second
  // pass over every byte, is left off).
  if (jsonShapeProblem(text)) return false;
  d.Parse(text.data(), text.size());
  return !d.HasParseError() && d.IsObject();
}

void badGateway(ProviderReply& out, std::string type, std::string message) {
  out.ok = false;
  out.error_type = std::move(type);
  out.error_message = std::move(message);
  out.effective_status = 502;
}

/// Reads the error object of a body, in the shapes the APIs and common gateways use:
/// {"error": {"type"|"code", "message"}} (OpenAI, Anthropic's {"type": "error", "error": …},
/// OpenRouter with a numeric code), {"error": "text"}, vLLM's {"object": "error", "message",
/// "type", "code"}, FastAPI's {"detail": "text"}. False when the body carries none.
bool readError(const rapidjson::Value& d, ProviderReply& out) {
  std::string type, code, message;
  bool found = false;
  if (auto it = d.FindMember("error"); it != d.MemberEnd() && !it->value.IsNull()) {
    const auto& e = it->value;
    found = e.IsObject() || e.IsString();
    if (e.IsString()) message = scalarText(e);
    type = member(e, "type");
    code = member(e, "code");
    if (message.empty()) message = member(e, "message");
  } else if (member(d, "object") == "error") {
    found = true;
    type = member(d, "type");
    code = member(d, "code");
    message = member(d, "message");
  } else if (auto detail = d.FindMember("detail");
             detail != d.MemberEnd() && detail->value.IsString() && !d.HasMember("choices") &&
             !d.HasMember("content")) {
    found = true;
    message = scalarText(detail->value);
  }
  if (!found) return false;
  // The code is the more specific of the two (OpenAI: type "insufficient_quota" or
  // "requests", code "rate_limit_exceeded"; OpenRouter: a numeric code only).
  out.error_type = !type.empty() ? type : code;
  if (!type.empty() && !code.empty() && code != type) out.error_type += "/" + code;
  if (out.error_type.empty()) out.error_type = "error";
  out.error_type = clip(out.error_type, kMaxErrorType);
  out.error_message = clip(message);
  return true;
}

bool has(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

/// Sets effective_status, permanent, refused and overloaded from the error type/code and the
/// status (effective_status 0 = the error came in a 2xx body: the type decides).
void classifyError(ProviderReply& out) {
  std::string t = out.error_type;
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  int numeric = 0;
  for (std::size_t at = 0; at < t.size(); ++at) {  // a numeric code anywhere: 429, "502"
    if (t[at] >= '0' && t[at] <= '9' && (at == 0 || t[at - 1] == '/')) {
      std::from_chars(t.data() + at, t.data() + t.size(), numeric);
      if (numeric < 400 || numeric > 599) numeric = 0;
      break;
    }
  }
  out.overloaded = has(t, "overloaded");
  out.refused = has(t, "content_filter") || has(t, "content_policy") || has(t, "safety");
  out.permanent = has(t, "insufficient_quota") || has(t, "billing");
  if (out.effective_status != 0) return;
  out.effective_status = numeric                                                    ? numeric
                         : out.overloaded                                           ? 529
                         : has(t, "rate_limit") || t == "requests" || t == "tokens" ? 429
                         : out.permanent                                            ? 429
                         : has(t, "authentication") || has(t, "invalid_api_key")    ? 401
                         : has(t, "permission")                                     ? 403
                         : has(t, "not_found")                                      ? 404
                         : has(t, "too_large")                                      ? 413
                         : has(t, "invalid_request") || has(t, "context_length") || out.refused
                             ? 400
                         : has(t, "timeout") ? 504
                                             : 500;  // api_error, server_error, unknown
}

/// Reads the assistant message of a 2xx JSON object (not an error).
void readMessage(Provider provider, const rapidjson::Value& d, ProviderReply& out) {
  if (provider == Provider::kOpenAi) {
    out.usage = parseOpenAiUsage(d);
    const auto choices = d.FindMember("choices");
    if (choices == d.MemberEnd() || !choices->value.IsArray() || choices->value.Empty()) {
      // Azure answers a prompt its content filter stopped with no choices and the verdict in
      // prompt_filter_results.
      bool filtered = false;
      if (auto pf = d.FindMember("prompt_filter_results");
          pf != d.MemberEnd() && pf->value.IsArray())
        for (const auto& r : pf->value.GetArray())
          if (auto c = r.IsObject() ? r.FindMember("content_filter_results") : r.MemberEnd();
              r.IsObject() && c != r.MemberEnd() && c->value.IsObject())
            for (const auto& cat : c->value.GetObject())
              if (cat.value.IsObject() && cat.value.HasMember("filtered") &&
                  cat.value["filtered"].IsTrue())
                filtered = true;
      if (filtered) {
        out.error_type = "content_filter";
        out.error_message = "the provider's content filter stopped the prompt";
        out.refused = true;
        out.effective_status = 400;
        return;
      }
      badGateway(out, "bad_response", "no choices");
      return;
    }
    const auto& c = choices->value[0];
    const std::string reason = member(c, "finish_reason");
    out.finish = reason == "stop"             ? FinishReason::kStop
                 : reason == "length"         ? FinishReason::kLength
                 : reason == "content_filter" ? FinishReason::kRefusal
                                              : FinishReason::kOther;
    if (auto m = c.IsObject() ? c.FindMember("message") : c.MemberEnd();
        c.IsObject() && m != c.MemberEnd() && m->value.IsObject()) {
      const auto& msg = m->value;
      if (auto content = msg.FindMember("content"); content != msg.MemberEnd()) {
        if (content->value.IsString()) {
          out.content = scalarText(content->value);
        } else if (content->value.IsArray()) {  // [{"type": "text", "text": …}, …]
          for (const auto& part : content->value.GetArray())
            if (member(part, "type") == "text") out.content += member(part, "text");
        }
      }
      if (!member(msg, "refusal").empty()) out.finish = FinishReason::kRefusal;
    } else {
      badGateway(out, "bad_response", "a choice without a message");
      return;
    }
    if (out.finish == FinishReason::kOther) out.finish = FinishReason::kStop;
    out.ok = true;
    return;
  }
  out.usage = parseAnthropicUsage(d);
  const std::string reason = member(d, "stop_reason");
  out.finish = reason == "max_tokens" ? FinishReason::kLength
               : reason == "refusal"  ? FinishReason::kRefusal
                                      : FinishReason::kStop;
  const auto content = d.FindMember("content");
  if (content == d.MemberEnd() || !content->value.IsArray()) {
    badGateway(out, "bad_response", "no content");
    return;
  }
  bool text = false, tool = false;
  std::string tool_input;
  for (const auto& block : content->value.GetArray()) {
    const std::string type = member(block, "type");
    if (type == "tool_use" && !tool) {  // a forced tool: its input is the reply
      tool = true;
      if (auto in = block.FindMember("input"); in != block.MemberEnd()) {
        rapidjson::StringBuffer b;
        rapidjson::Writer<rapidjson::StringBuffer> w(b);
        in->value.Accept(w);
        tool_input.assign(b.GetString(), b.GetSize());
      }
    }
    if (type != "text") continue;
    text = true;
    out.content += member(block, "text");
  }
  if (tool) out.content = std::move(tool_input);
  if (!text && !tool &&
      out.finish == FinishReason::kStop) {  // a refusal or a cut reply may be empty
    badGateway(out, "bad_response", "no text content block");
    return;
  }
  out.ok = true;
}

/// A server-sent-event body (WHATWG HTML §9.2): its first non-blank line is a `data:`,
/// `event:`, `id:` or comment (`:`) line.
bool isEventStream(std::string_view body) {
  std::size_t at = body.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos) return false;
  body.remove_prefix(at);
  return body.substr(0, 5) == "data:" || body.substr(0, 6) == "event:" ||
         body.substr(0, 3) == "id:" || body.front() == ':';
}

/// Calls `on_data(payload)` for each event's data (its `data:` lines joined by \n), in order;
/// stops early when it returns false. False when the stream holds too many events.
template <typename OnData>
bool forEachEvent(std::string_view body, OnData on_data) {
  std::string data;
  bool pending = false;
  std::size_t events = 0;
  auto dispatch = [&] {
    if (!pending) return true;
    pending = false;
    if (++events > kMaxStreamEvents) return false;
    const bool go_on = on_data(std::string_view(data));
    data.clear();
    return go_on;
  };
  while (!body.empty()) {
    const std::size_t nl = body.find('\n');
    std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (!dispatch()) return events <= kMaxStreamEvents;
      continue;
    }
    if (line.substr(0, 5) != "data:") continue;  // event:, id:, retry:, comments
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (pending) data += '\n';
    data.append(line);
    pending = true;
  }
  dispatch();
  return events <= kMaxStreamEvents;
}

/// What a stream has said so far.
struct StreamState {
  rapidjson::Document whole{rapidjson::kObjectType};  // the non-streamed reply it stands for
  std::string text, refusal, reason;
  std::string tool_json;   // an Anthropic tool_use block's input, from its input_json_delta parts
  bool tool = false;       // the stream carries a tool_use block
  rapidjson::Value usage;  // null until the stream reports one
  bool ended = false;
};

/// One chunk of an OpenAI chat-completions stream.
void readOpenAiChunk(const rapidjson::Document& chunk, StreamState& st) {
  if (auto u = chunk.FindMember("usage"); u != chunk.MemberEnd() && u->value.IsObject())
    st.usage.CopyFrom(u->value, st.whole.GetAllocator());
  const auto choices = chunk.FindMember("choices");
  if (choices == chunk.MemberEnd() || !choices->value.IsArray() || choices->value.Empty()) return;
  const auto& c = choices->value[0];
  if (!c.IsObject()) return;
  if (const auto fr = member(c, "finish_reason"); !fr.empty()) st.reason = fr;
  if (auto delta = c.FindMember("delta"); delta != c.MemberEnd()) {
    st.text += member(delta->value, "content");
    st.refusal += member(delta->value, "refusal");
  }
}

/// Merges `u` into the usage so far: message_delta's counts are cumulative and replace
/// message_start's.
void mergeUsage(const rapidjson::Value& u, StreamState& st) {
  auto& alloc = st.whole.GetAllocator();
  if (!st.usage.IsObject()) st.usage.SetObject();
  for (const auto& kv : u.GetObject()) {
    if (kv.value.IsNull()) continue;
    rapidjson::Value v(kv.value, alloc);
    if (auto at = st.usage.FindMember(kv.name); at != st.usage.MemberEnd())
      at->value = v;
    else
      st.usage.AddMember(rapidjson::Value(kv.name, alloc), v, alloc);
  }
}

/// One event of an Anthropic Messages stream.
void readAnthropicEvent(const rapidjson::Document& chunk, StreamState& st) {
  const std::string type = member(chunk, "type");
  const auto field = [&](const char* key) -> const rapidjson::Value* {
    auto it = chunk.FindMember(key);
    return it != chunk.MemberEnd() && it->value.IsObject() ? &it->value : nullptr;
  };
  if (type == "message_start") {
    if (const auto* m = field("message"))
      if (auto u = m->FindMember("usage"); u != m->MemberEnd() && u->value.IsObject())
        st.usage.CopyFrom(u->value, st.whole.GetAllocator());
  } else if (type == "content_block_start") {
    if (const auto* b = field("content_block")) {
      if (member(*b, "type") == "text") st.text += member(*b, "text");
      if (member(*b, "type") == "tool_use") st.tool = true;
    }
  } else if (type == "content_block_delta") {
    if (const auto* d = field("delta")) {
      if (member(*d, "type") == "text_delta") st.text += member(*d, "text");
      if (member(*d, "type") == "input_json_delta") st.tool_json += member(*d, "partial_json");
    }
  } else if (type == "message_delta") {
    if (const auto* d = field("delta"))
      if (const auto sr = member(*d, "stop_reason"); !sr.empty()) st.reason = sr;
    if (const auto* u = field("usage")) mergeUsage(*u, st);
  } else if (type == "message_stop") {
    st.ended = true;
  }  // ping, content_block_stop, unknown event types: nothing to read
}

/// Assembles a streamed reply into `out` (its content, finish and usage). False, with
/// `out` an error, when the stream carries an error event, is unreadable, or stops before
/// its end (`[DONE]` / `message_stop`).
bool assembleStream(Provider provider, const std::string& body, ProviderReply& out) {
  StreamState st;
  bool broken = false, failed = false;
  const bool within = forEachEvent(body, [&](std::string_view data) {
    if (data == "[DONE]") {
      st.ended = true;
      return false;
    }
    rapidjson::Document chunk;
    if (!parseObject(data, chunk)) {
      broken = true;
      return false;
    }
    if (readError(chunk, out)) {  // an error event: the stream's way to fail
      failed = true;
      return false;
    }
    if (provider == Provider::kOpenAi)
      readOpenAiChunk(chunk, st);
    else
      readAnthropicEvent(chunk, st);
    return !st.ended;
  });
  // What the stream reported, in the API's own non-streamed shape, for the usage parsers.
  if (st.usage.IsObject()) st.whole.AddMember("usage", st.usage, st.whole.GetAllocator());
  out.usage =
      provider == Provider::kOpenAi ? parseOpenAiUsage(st.whole) : parseAnthropicUsage(st.whole);
  if (failed) {
    out.effective_status = 0;
    classifyError(out);
    // An error event before any content (Anthropic's overloaded_error right after
    // message_start, whose usage counts the input): the request produced nothing, is not
    // billed and may be retried; with content, what the stream reported is charged.
    if (st.text.empty() && st.tool_json.empty() && !st.tool) out.usage.reset();
    return false;
  }
  if (!within || broken) {
    badGateway(out, "bad_response",
               !within ? "a stream of more than 200,000 events"
                       : "a stream event that is not a JSON object");
    return false;
  }
  // An OpenAI stream that gave its finish reason is whole even without [DONE] (some servers
  // omit it).
  if (!st.ended && !(provider == Provider::kOpenAi && !st.reason.empty())) {
    badGateway(out, "stream_incomplete", "the stream stopped before its end");
    return false;
  }
  out.content = st.tool ? (st.tool_json.empty() ? std::string("{}") : std::move(st.tool_json))
                        : std::move(st.text);
  const std::string& reason = st.reason;
  if (provider == Provider::kOpenAi) {
    out.finish = reason == "length"                                  ? FinishReason::kLength
                 : reason == "content_filter" || !st.refusal.empty() ? FinishReason::kRefusal
                                                                     : FinishReason::kStop;
  } else {
    out.finish = reason == "max_tokens" ? FinishReason::kLength
                 : reason == "refusal"  ? FinishReason::kRefusal
                                        : FinishReason::kStop;
  }
  return true;
}

/// OpenAI's `response_format` of `format` (nothing for free text).
void writeResponseFormat(rapidjson::Writer<rapidjson::StringBuffer>& w, const ReplyFormat& format,
                         const rapidjson::Document& schema) {
  if (format.kind == ReplyFormat::Kind::kText) return;
  w.Key("response_format");
  w.StartObject();
  if (format.kind == ReplyFormat::Kind::kJsonObject) {
    str(w, "type", "json_object");
  } else {
    str(w, "type", "json_schema");
    w.Key("json_schema");
    w.StartObject();
    str(w, "name", format.schema_name);
    w.Key("schema");
    schema.Accept(w);
    w.Key("strict");
    w.Bool(true);
    w.EndObject();
  }
  w.EndObject();
}

/// Anthropic's constrained reply: one tool whose input schema is the reply's, forced.
void writeForcedTool(rapidjson::Writer<rapidjson::StringBuffer>& w, const ReplyFormat& format,
                     const rapidjson::Document& schema) {
  w.Key("tools");
  w.StartArray();
  w.StartObject();
  str(w, "name", format.schema_name);
  str(w, "description", "Records the reply, in the shape of its input schema.");
  w.Key("input_schema");
  schema.Accept(w);
  w.EndObject();
  w.EndArray();
  w.Key("tool_choice");
  w.StartObject();
  str(w, "type", "tool");
  str(w, "name", format.schema_name);
  w.EndObject();
}

}  // namespace

bool isReasoningModel(std::string_view model) {
  std::string m;
  for (char c : model.substr(model.rfind('/') + 1))  // "openai/o3-mini" (a router's name)
    m.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (std::string_view prefix : {"o1", "o3", "o4", "gpt-5"})
    if (m.starts_with(prefix)) return true;
  return false;
}

HttpRequest buildRequest(Provider provider, const std::string& endpoint, const std::string& api_key,
                         const std::string& model, const Prompt& prompt, int max_tokens,
                         const ReplyFormat& format) {
  HttpRequest r;
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  rapidjson::Document schema;
  if (format.kind == ReplyFormat::Kind::kJsonSchema) {
    schema.Parse(format.schema.c_str());
    if (schema.HasParseError())
      throw std::invalid_argument("buildRequest: the reply schema is not JSON");
  }
  // OpenAI's reasoning models take max_completion_tokens and their default temperature only.
  const bool reasoning = provider == Provider::kOpenAi && isReasoningModel(model);
  w.StartObject();
  str(w, "model", model);
  if (!reasoning) {
    w.Key("temperature");
    if (format.temperature == 0)
      w.Int(0);
    else
      w.Double(format.temperature);
  }
  w.Key(reasoning ? "max_completion_tokens" : "max_tokens");
  w.Int(max_tokens);
  if (provider == Provider::kOpenAi) {
    r.url = endpointUrl(endpoint, "/chat/completions");
    r.headers.emplace_back("Authorization", "Bearer " + api_key);
    writeResponseFormat(w, format, schema);
    w.Key("messages");
    w.StartArray();
    w.StartObject();
    str(w, "role", "system");
    str(w, "content", prompt.system);
    w.EndObject();
    w.StartObject();
    str(w, "role", "user");
    str(w, "content", prompt.user);
    w.EndObject();
    w.EndArray();
  } else {
    r.url = endpointUrl(endpoint, "/messages");
    r.headers.emplace_back("x-api-key", api_key);
    r.headers.emplace_back("anthropic-version", "2023-06-01");
    if (format.kind == ReplyFormat::Kind::kJsonSchema) writeForcedTool(w, format, schema);
    str(w, "system", prompt.system);
    w.Key("messages");
    w.StartArray();
    w.StartObject();
    str(w, "role", "user");
    str(w, "content", prompt.user);
    w.EndObject();
    w.EndArray();
  }
  w.EndObject();
  r.body.assign(buf.GetString(), buf.GetSize());
  return r;
}

RequestTemplate::RequestTemplate(Provider provider, const std::string& endpoint,
                                 const std::string& api_key, const std::string& model,
                                 const std::string& system, int max_tokens,
                                 const ReplyFormat& format) {
  // The body with a marker as the user message, cut around it: the user message is the body's
  // last string for both providers, and the marker needs no escape, so it is written as is.
  static constexpr std::string_view kMarker = "\"ASSAY_USER_MESSAGE_5f2c9e\"";
  Prompt p;
  p.system = system;
  p.user = std::string(kMarker.substr(1, kMarker.size() - 2));
  fixed_ = buildRequest(provider, endpoint, api_key, model, p, max_tokens, format);
  const auto at = fixed_.body.rfind(kMarker);
  if (at == std::string::npos) throw std::logic_error("RequestTemplate: no user message");
  before_ = fixed_.body.substr(0, at);
  after_ = fixed_.body.substr(at + kMarker.size());
  fixed_.body.clear();
}

HttpRequest RequestTemplate::request(const std::string& user) const {
  HttpRequest r;
  fill(user, r);
  return r;
}

void RequestTemplate::fill(std::string_view user, HttpRequest& out) const {
  // Assigned, not constructed: a reused request keeps its strings' capacity.
  out.url = fixed_.url;
  out.method = fixed_.method;
  out.headers = fixed_.headers;
  out.timeout = fixed_.timeout;
  out.body.clear();
  out.body.reserve(before_.size() + user.size() + 64 + after_.size());
  out.body.append(before_);
  appendJsonString(out.body, user);  // the bytes RapidJSON's writer wrote (json_text.hpp)
  out.body.append(after_);
}

ProviderReply parseReply(Provider provider, int status, const std::string& body) {
  ProviderReply out;
  out.effective_status = status;
  const bool success = status >= 200 && status < 300;
  if (success && isEventStream(body)) {
    if (!assembleStream(provider, body, out)) return out;
    out.ok = true;
    return out;
  }
  rapidjson::Document d;
  const bool json = parseObject(body, d);
  if (!success) {
    if (!json || !readError(d, out)) out.error_type = "http_" + std::to_string(status);
    classifyError(out);
    return out;
  }
  if (!json) {
    badGateway(out, "bad_response", "2xx body is not a JSON object");
    return out;
  }
  if (readError(d, out)) {  // an error object inside a 2xx body (a gateway's way)
    out.effective_status = 0;
    classifyError(out);
    if (provider == Provider::kOpenAi) out.usage = parseOpenAiUsage(d);
    return out;
  }
  readMessage(provider, d, out);
  return out;
}

}  // namespace assay::llm
