#include "judges/llm/provider.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "judges/json_limits.hpp"

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

std::string getString(const rapidjson::Value& v, const char* key) {
  if (!v.IsObject()) return {};
  auto it = v.FindMember(key);
  return it != v.MemberEnd() && it->value.IsString()
             ? std::string(it->value.GetString(), it->value.GetStringLength())
             : std::string();
}

}  // namespace

HttpRequest buildRequest(Provider provider, const std::string& endpoint, const std::string& api_key,
                         const std::string& model, const Prompt& prompt, int max_tokens) {
  HttpRequest r;
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  str(w, "model", model);
  w.Key("temperature");
  w.Int(0);
  w.Key("max_tokens");
  w.Int(max_tokens);
  if (provider == Provider::kOpenAi) {
    r.url = trimSlash(endpoint) + "/chat/completions";
    r.headers.emplace_back("Authorization", "Bearer " + api_key);
    w.Key("response_format");
    w.StartObject();
    str(w, "type", "json_object");
    w.EndObject();
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
    const std::string base = trimSlash(endpoint);
    r.url = base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0
                ? base + "/messages"
                : base + "/v1/messages";
    r.headers.emplace_back("x-api-key", api_key);
    r.headers.emplace_back("anthropic-version", "2023-06-01");
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

ProviderReply parseReply(Provider provider, int status, const std::string& body) {
  ProviderReply out;
  rapidjson::Document d;
  // A reply nested too deep (or with a NUL byte) is no JSON object: the status decides.
  const bool shaped = !jsonShapeProblem(body);
  if (shaped) d.Parse(body.c_str(), body.size());
  const bool json = shaped && !d.HasParseError() && d.IsObject();
  if (status < 200 || status >= 300) {
    if (json && d.HasMember("error")) {
      const auto& e = d["error"];
      out.error_type = getString(e, "type");
      if (out.error_type.empty()) out.error_type = getString(e, "code");
      out.error_message = getString(e, "message");
    }
    if (out.error_type.empty()) out.error_type = "http_" + std::to_string(status);
    out.overloaded = out.error_type == "overloaded_error";
    return out;
  }
  if (!json) {
    out.error_type = "bad_response";
    out.error_message = "2xx body is not a JSON object";
    return out;
  }
  if (provider == Provider::kOpenAi) {
    out.usage = parseOpenAiUsage(d);
    if (!d.HasMember("choices") || !d["choices"].IsArray() || d["choices"].Empty()) {
      out.error_type = "bad_response";
      out.error_message = "no choices";
      return out;
    }
    const auto& c = d["choices"][0];
    const std::string reason = getString(c, "finish_reason");
    out.finish = reason == "stop"             ? FinishReason::kStop
                 : reason == "length"         ? FinishReason::kLength
                 : reason == "content_filter" ? FinishReason::kRefusal
                                              : FinishReason::kOther;
    if (c.HasMember("message") && c["message"].IsObject()) {
      out.content = getString(c["message"], "content");
      if (!getString(c["message"], "refusal").empty()) out.finish = FinishReason::kRefusal;
    }
    if (out.finish == FinishReason::kOther) out.finish = FinishReason::kStop;
    out.ok = true;
    return out;
  }
  out.usage = parseAnthropicUsage(d);
  const std::string reason = getString(d, "stop_reason");
  out.finish = reason == "max_tokens" ? FinishReason::kLength
               : reason == "refusal"  ? FinishReason::kRefusal
                                      : FinishReason::kStop;
  if (d.HasMember("content") && d["content"].IsArray()) {
    for (const auto& block : d["content"].GetArray())
      if (getString(block, "type") == "text") out.content += getString(block, "text");
  } else {
    out.error_type = "bad_response";
    out.error_message = "no content";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace assay::llm
