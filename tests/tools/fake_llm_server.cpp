// A fake LLM provider for tests: the only fake in assay's tests. It speaks the OpenAI
// chat-completions API (POST /v1/chat/completions) and the Anthropic Messages API
// (POST /v1/messages) with real response bodies, usage fields, error bodies, status codes and
// Retry-After, over HTTP or HTTPS (--cert/--key, e.g. signed by a test CA).
//
//   fake_llm_server [--port N] [--cert PEM --key PEM] [--api-key KEY]
// Prints "LISTENING <port>" on stdout, serves until SIGTERM/SIGINT or stdin closes.
//
// What it answers, first match wins:
//   1. the next queued response, if any (POST /_fake/script with a JSON array of
//      {"status", "retry_after"?, "delay_ms"?, "kind"?, "score"?, "content"?,
//      "prompt_tokens"? (the input tokens its usage reports)} objects;
//      kind: "verdict" (default), "truncated", "fenced", "refusal", "error", "overloaded",
//      "no_usage", "null_details", and the reply side's failure shapes:
//        "stream": the reply as the API's server-sent-event stream (usage included);
//        "stream_cut": that stream stopping half-way (OpenAI: no usage yet; Anthropic: after
//          message_start, which reports the input tokens);
//        "error_200": an error object in a 200 body (OpenAI shape: OpenRouter's
//          {"error": {"code": 429, …}}; Anthropic: an overloaded_error), nothing billed;
//        "empty_choices": a 200 with no choices (Anthropic: no content blocks), usage reported;
//        "quota": OpenAI's 429 insufficient_quota (Anthropic: 400 credit balance too low);
//        "content_filter": Azure OpenAI's 400 content_filter error (Anthropic: a 200 with
//          stop_reason "refusal", usage reported);
//   2. markers in the prompt: [[fake-status:429]] [[fake-retry-after:45]] [[fake-delay-ms:300]]
//      [[fake-score:3]] [[fake-kind:truncated]];
//   3. a request with a reply schema (OpenAI response_format json_schema, or a "Reply schema
//      (JSON Schema): …" line in the prompt): an object following it, scored from each
//      output's text for a listwise comparison (see listwiseReply); a request for free text
//      (OpenAI without response_format; Anthropic whose system prompt does not ask for JSON):
//      "Answer by MODEL: " and the start of the user message;
//   4. a verdict with score 1 + (FNV-1a of the prompt) mod 4: deterministic per event.
// GET /_fake/stats returns {"requests": N, "chat": N, "messages": N, …, "open_connections": N}
// (open_connections: the connections other than the one asking, each read to its end, so 0
// once every request of a killed client has been read and answered); GET /_fake/last_request
// the body of the last API request as received (what a prompt test inspects).
// A request with a verdict schema (a "score" property: an LLM judge's json_schema or forced
// tool) is answered {"justification", "unsupported_claim" (if the schema has it), "score"}; an
// Anthropic request that forces a tool is answered with a tool_use block holding the reply.
// POST /_fake/shift {"levels": N} moves every unscripted verdict N levels up the schema's scale
// (down if negative, clamped to its ends) from then on: a provider whose model changed under the
// same name (the judges' canary must catch it).
// POST /_fake/outage {"ms": N, "status": S} answers every API request with S (default 503, a
// real error body, nothing billed) for the next N ms: an endpoint down for a while.
// --delay-ms N delays every unscripted reply by N ms (a marker overrides it). --call-log FILE
// appends one line per billed (2xx) reply, the provider's own call log:
//   <FNV-1a of the prompt, hex> <received, epoch ms> <replied, epoch ms> <input> <output tokens>
// --request-log FILE appends every API request body, one per line (what a redaction check
// reads when /_fake/last_request, which keeps only the last one, is not enough).

#include <malloc.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::atomic<bool> g_stop{false};
std::atomic<long> g_requests{0}, g_chat{0}, g_messages{0};
std::atomic<int> g_open_connections{0};  // each served by its thread until the client closes
std::string g_api_key;
int g_delay_ms = 0;
std::atomic<std::int64_t> g_outage_until_ms{0};
std::atomic<int> g_outage_status{503};
std::atomic<int> g_score_shift{0};  // POST /_fake/shift
std::FILE* g_call_log = nullptr;
std::FILE* g_request_log = nullptr;  // --request-log: every API request body, one per line

std::int64_t epochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Scripted {
  int status = 200;
  std::optional<std::string> retry_after;
  int delay_ms = 0;
  std::string kind = "verdict";
  int score = 3;
  std::optional<std::string> content;
  std::optional<std::int64_t> prompt_tokens;  // the usage reported, whatever was sent
};
std::mutex g_mu;
std::deque<Scripted> g_script;
std::string g_last_request;  // the body of the last API request (GET /_fake/last_request)

std::string jsonString(const std::string& s) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  return b.GetString();
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

/// A verdict's justification names the prompt it answers (its FNV-1a, as in the call log): a
/// test maps a stored or written verdict to the billed call.
std::string fakeJustification(const std::string& prompt) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(prompt)));
  return std::string("Fake verdict of prompt ") + hex + ".";
}

std::optional<std::string> marker(const std::string& text, const std::string& name) {
  const std::string open = "[[fake-" + name + ":";
  const auto at = text.find(open);
  if (at == std::string::npos) return std::nullopt;
  const auto end = text.find("]]", at);
  if (end == std::string::npos) return std::nullopt;
  return text.substr(at + open.size(), end - at - open.size());
}

std::string promptText(const rapidjson::Document& d) {
  std::string out;
  if (d.HasMember("system") && d["system"].IsString()) out += d["system"].GetString();
  if (d.HasMember("messages") && d["messages"].IsArray())
    for (const auto& m : d["messages"].GetArray())
      if (m.IsObject() && m.HasMember("content") && m["content"].IsString())
        out += m["content"].GetString();
  return out;
}

/// The schema a request asks its reply to follow: OpenAI's structured outputs
/// (response_format json_schema), Anthropic's forced tool (tools[0].input_schema), or a "Reply
/// schema (JSON Schema): {…}" line in the prompt.
std::optional<std::string> replySchema(const rapidjson::Document& d, const std::string& prompt) {
  if (d.HasMember("response_format") && d["response_format"].IsObject()) {
    const auto& f = d["response_format"];
    if (f.HasMember("json_schema") && f["json_schema"].IsObject() &&
        f["json_schema"].HasMember("schema")) {
      rapidjson::StringBuffer b;
      rapidjson::Writer<rapidjson::StringBuffer> w(b);
      f["json_schema"]["schema"].Accept(w);
      return std::string(b.GetString(), b.GetSize());
    }
  }
  if (d.HasMember("tools") && d["tools"].IsArray() && !d["tools"].Empty() &&
      d["tools"][0].IsObject() && d["tools"][0].HasMember("input_schema")) {
    rapidjson::StringBuffer b;
    rapidjson::Writer<rapidjson::StringBuffer> w(b);
    d["tools"][0]["input_schema"].Accept(w);
    return std::string(b.GetString(), b.GetSize());
  }
  const std::string tag = "Reply schema (JSON Schema): ";
  const auto at = prompt.find(tag);
  if (at == std::string::npos) return std::nullopt;
  // The schema is one JSON value; whatever follows it (the user message) is not read.
  rapidjson::Document schema;
  schema.Parse<rapidjson::kParseStopWhenDoneFlag>(prompt.c_str() + at + tag.size());
  if (schema.HasParseError()) return std::nullopt;
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  schema.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

/// A reply to a listwise comparison (assay bakeoff): the data block between the
/// <<<ASSAY_DATA_…>>> markers holds {"outputs": {"A": text, …}}; every label in the schema gets
/// an integer per criterion. A content judge: the score follows the output's own text (its
/// length, and a hash of text, criterion and model for the rest), never its label, so two
/// models agree on clearly better outputs and nothing depends on the order. A model whose name
/// holds "position-biased" gives the label A 95 and every other label 40 instead.
std::string listwiseReply(const std::string& schema_text, const std::string& prompt,
                          const std::string& model) {
  rapidjson::Document schema, data;
  schema.Parse(schema_text.c_str());
  const auto open = prompt.rfind("<<<ASSAY_DATA_");  // the system prompt names it first
  if (open != std::string::npos) {
    const auto line = prompt.find('\n', open);
    const auto close = prompt.find("\n<<<END_ASSAY_DATA_", line);
    if (line != std::string::npos && close != std::string::npos)
      data.Parse(prompt.substr(line + 1, close - line - 1).c_str());
  }
  const bool biased = model.find("position-biased") != std::string::npos;
  std::string out = "{";
  if (!schema.HasParseError() && schema.IsObject() && schema.HasMember("required")) {
    bool first_label = true;
    for (const auto& l : schema["required"].GetArray()) {
      const std::string label = l.GetString();
      std::string text;
      if (data.IsObject() && data.HasMember("outputs") && data["outputs"].HasMember(l) &&
          data["outputs"][l].IsString())
        text = data["outputs"][l].GetString();
      out += std::string(first_label ? "" : ", ") + "\"" + label + "\": {";
      first_label = false;
      const auto& criteria = schema["properties"][l]["required"];
      bool first = true;
      for (const auto& c : criteria.GetArray()) {
        const std::string name = c.GetString();
        const long words = static_cast<long>(std::count(text.begin(), text.end(), ' ')) + 1;
        long score = std::min<long>(85, 20 + words / 2) +
                     static_cast<long>(fnv1a(model + "/" + name + "/" + text) % 11);
        if (biased) score = label == "A" ? 95 : 40;
        out += std::string(first ? "" : ", ") + "\"" + name +
               "\": " + std::to_string(std::clamp<long>(score, 0, 100));
        first = false;
      }
      out += "}";
    }
  }
  return out + "}";
}

/// The integers a verdict schema's "score" allows ({"anyOf": [{"type": "integer", "enum":
/// [...]}, {"type": "null"}]}), empty when it does not list them.
std::vector<int> scoreEnum(const rapidjson::Value& score) {
  std::vector<int> out;
  if (!score.IsObject() || !score.HasMember("anyOf") || !score["anyOf"].IsArray()) return out;
  for (const auto& alt : score["anyOf"].GetArray())
    if (alt.IsObject() && alt.HasMember("enum") && alt["enum"].IsArray())
      for (const auto& v : alt["enum"].GetArray())
        if (v.IsInt()) out.push_back(v.GetInt());
  return out;
}

/// A judge's verdict schema (a "score" property) rather than a listwise comparison's: the
/// verdict it asks for, members in the schema's order, `unsupported_claim` only if it has one.
/// An unscripted score (`hashed`: no script, no marker) is, as a strict schema makes a real
/// model's, one of the schema's allowed scores: the (FNV-1a of the prompt mod their count)-th,
/// which for the built-in 1-4 scale is the 1 + hash mod 4 of rule 4.
std::optional<std::string> verdictReply(const std::string& schema_text, int score, bool hashed,
                                        const std::string& prompt, int shift) {
  rapidjson::Document schema;
  schema.Parse(schema_text.c_str());
  if (schema.HasParseError() || !schema.IsObject() || !schema.HasMember("properties") ||
      !schema["properties"].IsObject() || !schema["properties"].HasMember("score"))
    return std::nullopt;
  const auto allowed = scoreEnum(schema["properties"]["score"]);
  if (hashed && !allowed.empty()) score = allowed[fnv1a(prompt) % allowed.size()];
  score += shift;
  if (!allowed.empty())
    score = std::clamp(score, *std::min_element(allowed.begin(), allowed.end()),
                       *std::max_element(allowed.begin(), allowed.end()));
  std::string out = "{\"justification\": \"" + fakeJustification(prompt) + "\", ";
  if (schema["properties"].HasMember("unsupported_claim")) out += "\"unsupported_claim\": null, ";
  return out + "\"score\": " + std::to_string(score) + "}";
}

/// Whether an Anthropic request forces a tool: its reply is a tool_use block.
bool forcesTool(const rapidjson::Document& d) {
  return d.HasMember("tool_choice") && d["tool_choice"].IsObject() &&
         d["tool_choice"].HasMember("type") && d["tool_choice"]["type"].IsString() &&
         std::string(d["tool_choice"]["type"].GetString()) == "tool" && d.HasMember("tools");
}

/// Whether a request asks for free text: OpenAI without response_format, Anthropic with a
/// system prompt that does not ask for JSON.
bool wantsText(const rapidjson::Document& d, bool anthropic) {
  if (!anthropic) return !d.HasMember("response_format");
  return !d.HasMember("system") || !d["system"].IsString() ||
         std::string(d["system"].GetString()).find("JSON") == std::string::npos;
}

/// A generation: the model's name and the start of the user message, so that two prompts or
/// two models give two different outputs.
std::string textReply(const rapidjson::Document& d, const std::string& model) {
  std::string user;
  if (d.HasMember("messages") && d["messages"].IsArray())
    for (const auto& m : d["messages"].GetArray())
      if (m.IsObject() && m.HasMember("content") && m["content"].IsString())
        user = m["content"].GetString();
  return "Answer by " + model + ": " + user.substr(0, 240);
}

// ---- Batch APIs --------------------------------------------------------------------------------
// OpenAI's Batch API (https://platform.openai.com/docs/api-reference/batch): POST /v1/files
// (multipart, purpose "batch", a JSONL file of {custom_id, method, url, body}), POST /v1/batches
// {input_file_id, endpoint, completion_window}, GET /v1/batches/{id} (validating → in_progress →
// completed, with output_file_id), GET /v1/files/{id}/content (JSONL of {id, custom_id, response:
// {status_code, request_id, body}, error}). Anthropic's Message Batches
// (https://docs.anthropic.com/en/api/creating-message-batches): POST /v1/messages/batches
// {requests: [{custom_id, params}]}, GET /v1/messages/batches/{id} (processing_status in_progress
// → ended, results_url), GET …/{id}/results (JSONL of {custom_id, result: {type: succeeded,
// message} | {type: errored, error}}). GET /v1/batches lists OpenAI batches newest first
// (?limit, ?after; has_more). A batch ends --batch-delay-ms after it was created (0: at
// once); each request is answered as the synchronous endpoint answers it (markers included), and
// is then counted in "batched" of /_fake/stats, not in "requests".

struct FakeBatch {
  std::string id;
  bool anthropic = false;
  std::string input_file;                                     // OpenAI: the uploaded file
  std::vector<std::pair<std::string, std::string>> requests;  // custom_id, body
  std::int64_t created_ms = 0;
  std::string output_file;  // OpenAI: the results file's id, once ended
  std::string results;      // the results JSONL, once ended
  bool ended = false;
};

std::mutex g_batch_mu;
std::map<std::string, std::string> g_files;  // id → content
std::map<std::string, FakeBatch> g_batches;
std::atomic<long> g_batches_created{0}, g_batched{0};
std::vector<std::size_t> g_batch_sizes;  // requests of each batch, in creation order
int g_batch_delay_ms = 0;
int g_batch_create_delay_ms = 0;     // the reply to a batch creation comes this late …
long g_batch_create_delay_from = 1;  // … from this batch on (1: every batch)

http::response<http::string_body> reply(const http::request<http::string_body>& req);

// The synchronous endpoint's answer to one request of a batch: status and body.
std::pair<int, std::string> answerOne(const std::string& body, bool anthropic) {
  http::request<http::string_body> one{http::verb::post,
                                       anthropic ? "/v1/messages" : "/v1/chat/completions", 11};
  one.body() = body;
  one.prepare_payload();
  if (!g_api_key.empty()) {
    if (anthropic)
      one.set("x-api-key", g_api_key);
    else
      one.set(http::field::authorization, "Bearer " + g_api_key);
  }
  auto r = reply(one);
  --g_requests;  // counted as batched, not as a synchronous request
  --(anthropic ? g_messages : g_chat);
  ++g_batched;
  return {static_cast<int>(r.result_int()), r.body()};
}

// Ends a batch whose time has come: answers every request and writes the results.
void settle(FakeBatch& b) {
  if (b.ended || epochMs() < b.created_ms + g_batch_delay_ms) return;
  std::string out;
  int n = 0;
  for (const auto& [custom_id, body] : b.requests) {
    const auto [status, answer] = answerOne(body, b.anthropic);
    if (b.anthropic) {
      out += status == 200 ? R"({"custom_id":)" + jsonString(custom_id) +
                                 R"(,"result":{"type":"succeeded","message":)" + answer + "}}\n"
                           : R"({"custom_id":)" + jsonString(custom_id) +
                                 R"(,"result":{"type":"errored","error":)" + answer + "}}\n";
    } else {
      const std::string n_text = std::to_string(++n);
      out += R"({"id":"batch_req_)" + n_text + R"(","custom_id":)" + jsonString(custom_id) +
             R"(,"response":{"status_code":)" + std::to_string(status) + R"(,"request_id":"req_)" +
             n_text + R"(","body":)" + answer + R"(},"error":null})" + "\n";
    }
  }
  b.results = out;
  b.ended = true;
  if (!b.anthropic) {
    b.output_file = "file-out-" + b.id;
    g_files[b.output_file] = out;
  }
}

std::string openAiBatchJson(const FakeBatch& b) {
  const auto n = std::to_string(b.requests.size());
  return R"({"id":")" + b.id + R"(","object":"batch","endpoint":"/v1/chat/completions",)" +
         R"("errors":null,"input_file_id":")" + b.input_file + R"(","completion_window":"24h",)" +
         R"("status":")" + (b.ended ? "completed" : "in_progress") + R"(","output_file_id":)" +
         (b.ended ? "\"" + b.output_file + "\"" : std::string("null")) +
         R"(,"error_file_id":null,"created_at":)" + std::to_string(b.created_ms / 1000) +
         R"(,"request_counts":{"total":)" + n + R"(,"completed":)" + (b.ended ? n : "0") +
         R"(,"failed":0}})";
}

std::string anthropicBatchJson(const FakeBatch& b, const std::string& host) {
  const auto n = std::to_string(b.requests.size());
  return R"({"id":")" + b.id + R"(","type":"message_batch","processing_status":")" +
         (b.ended ? "ended" : "in_progress") + R"(","request_counts":{"processing":)" +
         (b.ended ? "0" : n) + R"(,"succeeded":)" + (b.ended ? n : "0") +
         R"(,"errored":0,"canceled":0,"expired":0},"ended_at":)" +
         (b.ended ? "\"2026-01-01T00:00:00Z\"" : std::string("null")) +
         R"(,"created_at":"2026-01-01T00:00:00Z","expires_at":"2026-01-02T00:00:00Z","results_url":)" +
         (b.ended ? "\"http://" + host + "/v1/messages/batches/" + b.id + "/results\""
                  : std::string("null")) +
         "}";
}

// The multipart part named `name` of a multipart/form-data body.
std::optional<std::string> multipartPart(const std::string& body, const std::string& content_type,
                                         const std::string& name) {
  const auto b = content_type.find("boundary=");
  if (b == std::string::npos) return std::nullopt;
  std::string boundary = content_type.substr(b + 9);
  if (!boundary.empty() && boundary.front() == '"')
    boundary = boundary.substr(1, boundary.size() - 2);
  const std::string delim = "--" + boundary;
  std::size_t at = 0;
  while ((at = body.find(delim, at)) != std::string::npos) {
    at += delim.size();
    const auto headers_end = body.find("\r\n\r\n", at);
    if (headers_end == std::string::npos) return std::nullopt;
    const std::string headers = body.substr(at, headers_end - at);
    const auto next = body.find("\r\n" + delim, headers_end);
    if (next == std::string::npos) return std::nullopt;
    if (headers.find("name=\"" + name + "\"") != std::string::npos)
      return body.substr(headers_end + 4, next - headers_end - 4);
    at = next;
  }
  return std::nullopt;
}

// Handles the batch endpoints; nullopt for any other target.
std::optional<std::pair<int, std::string>> batchEndpoint(
    const http::request<http::string_body>& req) {
  const std::string target(req.target());
  const bool post = req.method() == http::verb::post;
  std::lock_guard lock(g_batch_mu);
  if (target == "/v1/files" && post) {
    const auto purpose =
        multipartPart(req.body(), std::string(req[http::field::content_type]), "purpose");
    const auto file =
        multipartPart(req.body(), std::string(req[http::field::content_type]), "file");
    if (!file || !purpose || *purpose != "batch")
      return std::pair{
          400,
          std::string(
              R"({"error":{"message":"Invalid file format or purpose: expected multipart with purpose 'batch' and a 'file' part","type":"invalid_request_error","param":"file","code":null}})")};
    const std::string id = "file-" + std::to_string(g_files.size() + 1);
    g_files[id] = *file;
    return std::pair{200, R"({"id":")" + id + R"(","object":"file","bytes":)" +
                              std::to_string(file->size()) + R"(,"created_at":)" +
                              std::to_string(epochMs() / 1000) +
                              R"(,"filename":"batch.jsonl","purpose":"batch"})"};
  }
  if (target == "/v1/batches" && post) {
    rapidjson::Document d;
    d.Parse(req.body().c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("input_file_id") ||
        !d["input_file_id"].IsString() || !g_files.count(d["input_file_id"].GetString()))
      return std::pair{
          400,
          std::string(
              R"({"error":{"message":"No file found with the given input_file_id","type":"invalid_request_error","param":"input_file_id","code":null}})")};
    FakeBatch b;
    b.id = "batch_" + std::to_string(++g_batches_created);
    b.created_ms = epochMs();
    b.input_file = d["input_file_id"].GetString();
    std::istringstream lines(g_files[b.input_file]);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      rapidjson::Document l;
      l.Parse(line.c_str());
      if (l.HasParseError() || !l.HasMember("custom_id") || !l.HasMember("body")) continue;
      rapidjson::StringBuffer buf;
      rapidjson::Writer<rapidjson::StringBuffer> w(buf);
      l["body"].Accept(w);
      b.requests.emplace_back(l["custom_id"].GetString(), buf.GetString());
    }
    g_batch_sizes.push_back(b.requests.size());
    auto& stored = g_batches[b.id] = std::move(b);
    return std::pair{200, openAiBatchJson(stored)};
  }
  if ((target == "/v1/batches" || target.rfind("/v1/batches?", 0) == 0) && !post) {
    // The list, newest first: ?limit (1–100, default 20) and ?after (a batch id) as OpenAI's.
    std::size_t limit = 20;
    std::string after;
    const auto q = target.find('?');
    if (q != std::string::npos) {
      std::istringstream params(target.substr(q + 1));
      for (std::string kv; std::getline(params, kv, '&');) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos) continue;
        if (kv.substr(0, eq) == "limit")
          limit = std::clamp<std::size_t>(std::strtoul(kv.c_str() + eq + 1, nullptr, 10), 1, 100);
        if (kv.substr(0, eq) == "after") after = kv.substr(eq + 1);
      }
    }
    std::vector<FakeBatch*> all;
    for (auto& [id, b] : g_batches)
      if (!b.anthropic) all.push_back(&b);
    std::sort(all.begin(), all.end(), [](const FakeBatch* x, const FakeBatch* y) {
      return x->created_ms > y->created_ms || (x->created_ms == y->created_ms && x->id > y->id);
    });
    std::size_t from = 0;
    if (!after.empty())
      while (from < all.size() && all[from++]->id != after) {
      }
    std::string data;
    std::size_t n = 0;
    for (std::size_t i = from; i < all.size() && n < limit; ++i, ++n) {
      settle(*all[i]);
      data += (n ? "," : "") + openAiBatchJson(*all[i]);
    }
    const bool more = from + n < all.size();
    return std::pair{200, R"({"object":"list","data":[)" + data + R"(],"first_id":)" +
                              (n ? "\"" + all[from]->id + "\"" : std::string("null")) +
                              R"(,"last_id":)" +
                              (n ? "\"" + all[from + n - 1]->id + "\"" : std::string("null")) +
                              R"(,"has_more":)" + (more ? "true" : "false") + "}"};
  }
  if (target.rfind("/v1/batches/", 0) == 0 && !post) {
    const auto it = g_batches.find(target.substr(12));
    if (it == g_batches.end())
      return std::pair{
          404,
          std::string(
              R"({"error":{"message":"No batch found","type":"invalid_request_error","param":null,"code":null}})")};
    settle(it->second);
    return std::pair{200, openAiBatchJson(it->second)};
  }
  if (target.rfind("/v1/files/", 0) == 0 && target.size() > 18 &&
      target.substr(target.size() - 8) == "/content") {
    const auto it = g_files.find(target.substr(10, target.size() - 18));
    if (it == g_files.end())
      return std::pair{
          404,
          std::string(
              R"({"error":{"message":"No such File object","type":"invalid_request_error","param":"id","code":null}})")};
    return std::pair{200, it->second};
  }
  if (target == "/v1/messages/batches" && post) {
    rapidjson::Document d;
    d.Parse(req.body().c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("requests") || !d["requests"].IsArray())
      return std::pair{
          400,
          std::string(
              R"({"type":"error","error":{"type":"invalid_request_error","message":"requests: Field required"}})")};
    FakeBatch b;
    b.anthropic = true;
    b.id = "msgbatch_" + std::to_string(++g_batches_created);
    b.created_ms = epochMs();
    for (const auto& r : d["requests"].GetArray()) {
      if (!r.IsObject() || !r.HasMember("custom_id") || !r.HasMember("params")) continue;
      rapidjson::StringBuffer buf;
      rapidjson::Writer<rapidjson::StringBuffer> w(buf);
      r["params"].Accept(w);
      b.requests.emplace_back(r["custom_id"].GetString(), buf.GetString());
    }
    g_batch_sizes.push_back(b.requests.size());
    auto& stored = g_batches[b.id] = std::move(b);
    return std::pair{200, anthropicBatchJson(stored, std::string(req[http::field::host]))};
  }
  if (target.rfind("/v1/messages/batches/", 0) == 0 && !post) {
    std::string id = target.substr(21);
    const bool results = id.size() > 8 && id.substr(id.size() - 8) == "/results";
    if (results) id = id.substr(0, id.size() - 8);
    const auto it = g_batches.find(id);
    if (it == g_batches.end())
      return std::pair{
          404,
          std::string(
              R"({"type":"error","error":{"type":"not_found_error","message":"batch not found"}})")};
    settle(it->second);
    if (results) return std::pair{200, it->second.results};
    return std::pair{200, anthropicBatchJson(it->second, std::string(req[http::field::host]))};
  }
  return std::nullopt;
}

http::response<http::string_body> reply(const http::request<http::string_body>& req) {
  http::response<http::string_body> res{http::status::ok, req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  const std::string target(req.target());
  const bool anthropic = target == "/v1/messages";
  auto finish = [&](int status, std::string body) {
    res.result(static_cast<unsigned>(status));
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  };
  if (target == "/_fake/stats") {
    return finish(
        200, "{\"requests\":" + std::to_string(g_requests.load()) +
                 ",\"chat\":" + std::to_string(g_chat.load()) +
                 ",\"messages\":" + std::to_string(g_messages.load()) +
                 ",\"batches\":" + std::to_string(g_batches_created.load()) +
                 ",\"batched\":" + std::to_string(g_batched.load()) + ",\"batch_sizes\":" +
                 [] {
                   std::lock_guard lock(g_batch_mu);
                   std::string list = "[";
                   for (auto n : g_batch_sizes)
                     list += (list.size() > 1 ? "," : "") + std::to_string(n);
                   return list + "]";
                 }() +
                 ",\"open_connections\":" + std::to_string(g_open_connections.load() - 1) + "}");
  }
  if (target == "/_fake/last_request") {
    std::lock_guard lock(g_mu);
    return finish(200, g_last_request);
  }
  if (target == "/_fake/script") {
    rapidjson::Document d;
    d.Parse(req.body().c_str());
    if (d.HasParseError() || !d.IsArray()) return finish(400, "{\"error\":\"expected an array\"}");
    std::lock_guard lock(g_mu);
    for (const auto& v : d.GetArray()) {
      Scripted s;
      if (v.HasMember("status")) s.status = v["status"].GetInt();
      if (v.HasMember("retry_after"))  // "30" or 30
        s.retry_after = v["retry_after"].IsString() ? v["retry_after"].GetString()
                                                    : std::to_string(v["retry_after"].GetInt64());
      if (v.HasMember("delay_ms")) s.delay_ms = v["delay_ms"].GetInt();
      if (v.HasMember("kind")) s.kind = v["kind"].GetString();
      if (v.HasMember("score")) s.score = v["score"].GetInt();
      if (v.HasMember("content")) s.content = v["content"].GetString();
      if (v.HasMember("prompt_tokens")) s.prompt_tokens = v["prompt_tokens"].GetInt64();
      g_script.push_back(s);
    }
    return finish(200, "{\"queued\":" + std::to_string(d.Size()) + "}");
  }
  if (target == "/_fake/shift") {
    rapidjson::Document d;
    d.Parse(req.body().c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("levels") || !d["levels"].IsInt())
      return finish(400, R"({"error":"expected {\"levels\": N}"})");
    g_score_shift = d["levels"].GetInt();
    return finish(200, "{\"levels\":" + std::to_string(g_score_shift.load()) + "}");
  }
  if (target == "/_fake/outage") {
    rapidjson::Document d;
    d.Parse(req.body().c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("ms") || !d["ms"].IsInt())
      return finish(400, R"({"error":"expected {\"ms\": N}"})");
    g_outage_status = d.HasMember("status") && d["status"].IsInt() ? d["status"].GetInt() : 503;
    g_outage_until_ms = epochMs() + d["ms"].GetInt();
    return finish(200, "{\"outage_ms\":" + std::to_string(d["ms"].GetInt()) + "}");
  }
  if (target.rfind("/v1/files", 0) == 0 || target.rfind("/v1/batches", 0) == 0 ||
      target.rfind("/v1/messages/batches", 0) == 0) {
    const bool anthropic_batch = target.rfind("/v1/messages/batches", 0) == 0;
    if (!g_api_key.empty()) {
      const std::string auth = anthropic_batch ? std::string(req["x-api-key"])
                                               : std::string(req[http::field::authorization]);
      if (auth != (anthropic_batch ? g_api_key : "Bearer " + g_api_key))
        return finish(
            401,
            anthropic_batch
                ? R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})"
                : R"({"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})");
    }
    if (auto b = batchEndpoint(req)) {
      const bool creation = req.method() == http::verb::post &&
                            (target == "/v1/batches" || target == "/v1/messages/batches");
      if (creation && b->first == 200 && g_batch_create_delay_ms > 0 &&
          g_batches_created.load() >= g_batch_create_delay_from)
        std::this_thread::sleep_for(std::chrono::milliseconds(g_batch_create_delay_ms));
      if (target.find("/content") != std::string::npos ||
          target.find("/results") != std::string::npos)
        res.set(http::field::content_type, "application/jsonl");
      return finish(b->first, std::move(b->second));
    }
  }
  if (target != "/v1/chat/completions" && !anthropic) {
    return finish(404,
                  R"({"error":{"message":"Unknown request URL: )" + target +
                      R"(","type":"invalid_request_error","param":null,"code":"unknown_url"}})");
  }
  ++g_requests;
  ++(anthropic ? g_messages : g_chat);
  {
    std::lock_guard lock(g_mu);
    g_last_request = req.body();
    if (g_request_log) {
      std::string line = req.body();
      for (auto& c : line)
        if (c == '\n') c = ' ';  // JSON bodies hold no raw newline; keep one request a line
      std::fprintf(g_request_log, "%s\n", line.c_str());
      std::fflush(g_request_log);
    }
  }
  if (epochMs() < g_outage_until_ms.load()) {
    const int status = g_outage_status.load();
    return finish(
        status,
        anthropic
            ? R"({"type":"error","error":{"type":"api_error","message":"Internal server error"}})"
            : R"({"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}})");
  }
  if (!g_api_key.empty()) {
    const std::string auth =
        anthropic ? std::string(req["x-api-key"]) : std::string(req[http::field::authorization]);
    if (auth != (anthropic ? g_api_key : "Bearer " + g_api_key)) {
      return finish(
          401,
          anthropic
              ? R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})"
              : R"({"error":{"message":"Incorrect API key provided: )" +
                    auth.substr(std::min<std::size_t>(auth.size(), 7)) +
                    R"(.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})");
    }
  }
  rapidjson::Document d;
  d.Parse(req.body().c_str());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("model") || !d["model"].IsString()) {
    return finish(
        400,
        anthropic
            ? R"({"type":"error","error":{"type":"invalid_request_error","message":"model: Field required"}})"
            : R"({"error":{"message":"you must provide a model parameter","type":"invalid_request_error","param":null,"code":null}})");
  }
  const std::string model = d["model"].GetString();
  const std::string prompt = promptText(d);
  Scripted s;
  bool scripted = false;
  bool hashed = false;  // the score comes from the prompt's hash (no script, no score marker)
  {
    std::lock_guard lock(g_mu);
    if (!g_script.empty()) {
      s = g_script.front();
      g_script.pop_front();
      scripted = true;
    }
  }
  const std::int64_t received_ms = epochMs();
  if (!scripted) {
    s.delay_ms = g_delay_ms;
    s.score = 1 + static_cast<int>(fnv1a(prompt) % 4);
    if (auto m = marker(prompt, "status")) s.status = std::stoi(*m);
    if (auto m = marker(prompt, "retry-after")) s.retry_after = *m;
    if (auto m = marker(prompt, "delay-ms")) s.delay_ms = std::stoi(*m);
    hashed = true;
    if (auto m = marker(prompt, "score")) s.score = std::stoi(*m), hashed = false;
    if (auto m = marker(prompt, "kind")) s.kind = *m;
  }
  if (s.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s.delay_ms));
  if (s.retry_after) res.set(http::field::retry_after, *s.retry_after);
  if (s.kind == "error_200") {
    return finish(
        200,
        anthropic
            ? R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"
            : R"({"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"rate limited upstream"}},"user_id":"user_fake"})");
  }
  if (s.kind == "quota") {
    return anthropic
               ? finish(
                     400,
                     R"({"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}})")
               : finish(
                     429,
                     R"({"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
  }
  if (s.kind == "content_filter" && !anthropic) {
    return finish(
        400,
        R"({"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}})");
  }
  if (s.kind == "overloaded") {
    return finish(529,
                  R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  }
  if (s.status != 200 || s.kind == "error") {
    const int status = s.status == 200 ? 500 : s.status;
    if (anthropic) {
      const char* type = status == 429   ? "rate_limit_error"
                         : status >= 500 ? "api_error"
                                         : "invalid_request_error";
      return finish(status, std::string(R"({"type":"error","error":{"type":")") + type +
                                R"(","message":"fake error )" + std::to_string(status) + "\"}}");
    }
    if (status == 429) {
      res.set("x-ratelimit-limit-requests", "500");
      res.set("x-ratelimit-remaining-requests", "0");
      return finish(
          429,
          R"({"error":{"message":"Rate limit reached for )" + model +
              R"( on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}})");
    }
    return finish(
        status,
        R"({"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}})");
  }
  if (!scripted && !s.content) {
    if (const auto schema = replySchema(d, prompt)) {
      // Not value_or: that would build the listwise reply for every verdict too, reading the
      // schema's missing members (rapidjson's shared null value: a data race under TSan).
      if (auto verdict =
              verdictReply(*schema, s.score, hashed, prompt, scripted ? 0 : g_score_shift.load()))
        s.content = std::move(verdict);
      else
        s.content = listwiseReply(*schema, prompt, model);
    } else if (wantsText(d, anthropic)) {
      s.content = textReply(d, model);
    }
  }
  std::string content =
      s.content.value_or("{\"score\": " + std::to_string(s.score) + ", \"justification\": \"" +
                         fakeJustification(prompt) + "\", \"unsupported_claim\": null}");
  const bool truncated = s.kind == "truncated";
  if (truncated) content = content.substr(0, content.size() / 2);
  if (s.kind == "fenced") content = "```json\n" + content + "\n```";
  if (s.kind == "refusal") content = "I'm sorry, but I can't help with that.";
  const long prompt_tokens = s.prompt_tokens ? static_cast<long>(*s.prompt_tokens)
                                             : static_cast<long>(prompt.size() / 4 + 7);
  const long completion_tokens = static_cast<long>(content.size() / 4 + 1);
  if (g_call_log) {
    std::lock_guard lock(g_mu);
    std::fprintf(g_call_log, "%016llx %lld %lld %ld %ld\n",
                 static_cast<unsigned long long>(fnv1a(prompt)),
                 static_cast<long long>(received_ms), static_cast<long long>(epochMs()),
                 prompt_tokens, s.kind == "no_usage" ? 0L : completion_tokens);
    std::fflush(g_call_log);
  }
  const std::string id = std::to_string(g_requests.load());
  if (anthropic) {
    const std::string usage =
        R"({"input_tokens":)" + std::to_string(prompt_tokens) +
        R"(,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":)" +
        std::to_string(completion_tokens) + "}";
    // A forced tool answers with a tool_use block whose input is the reply (when the reply is a
    // JSON object; a refusal or a cut reply stays text).
    rapidjson::Document input;
    input.Parse(content.c_str());
    const bool tool = forcesTool(d) && !input.HasParseError() && input.IsObject();
    const std::string tool_name =
        tool && d["tools"][0].HasMember("name") ? d["tools"][0]["name"].GetString() : "";
    const std::string stop = truncated                    ? "max_tokens"
                             : s.kind == "content_filter" ? "refusal"
                             : tool                       ? "tool_use"
                                                          : "end_turn";
    if (s.kind == "stream" || s.kind == "stream_cut") {
      res.set(http::field::content_type, "text/event-stream");
      std::string sse =
          "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_fake" +
          id + R"(","type":"message","role":"assistant","model":")" + model +
          R"(","content":[],"stop_reason":null,"usage":{"input_tokens":)" +
          std::to_string(prompt_tokens) + R"(,"output_tokens":1}}})" + "\n\n" +
          "event: content_block_start\ndata: " +
          (tool
               ? R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_fake","name":)" +
                     jsonString(tool_name) + R"(,"input":{}}})"
               : std::string(
                     R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})")) +
          "\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n";
      const std::size_t half = content.size() / 2;
      for (const std::string& piece : {content.substr(0, half), content.substr(half)}) {
        sse +=
            std::string("event: content_block_delta\ndata: ") +
            (tool
                 ? R"({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":)"
                 : R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":)") +
            jsonString(piece) + "}}\n\n";
        if (s.kind == "stream_cut") return finish(200, sse);
      }
      sse +=
          "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
          "event: message_delta\ndata: "
          R"({"type":"message_delta","delta":{"stop_reason":")" +
          stop + R"(","stop_sequence":null},"usage":{"output_tokens":)" +
          std::to_string(completion_tokens) +
          "}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
      return finish(200, sse);
    }
    const std::string blocks = s.kind == "empty_choices" || s.kind == "content_filter" ? "[]"
                               : tool ? R"([{"type":"tool_use","id":"toolu_fake","name":)" +
                                            jsonString(tool_name) + R"(,"input":)" + content + "}]"
                                      : R"([{"type":"text","text":)" + jsonString(content) + "}]";
    return finish(200, R"({"id":"msg_fake)" + id +
                           R"(","type":"message","role":"assistant","model":")" + model +
                           R"(","content":)" + blocks + R"(,"stop_reason":")" + stop +
                           R"(","stop_sequence":null)" +
                           (s.kind == "no_usage" ? "" : ",\"usage\":" + usage) + "}");
  }
  const std::string details =
      s.kind == "null_details"
          ? R"("prompt_tokens_details":null,"completion_tokens_details":null)"
          : R"("prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0})";
  const std::string usage = R"({"prompt_tokens":)" + std::to_string(prompt_tokens) +
                            R"(,"completion_tokens":)" + std::to_string(completion_tokens) +
                            R"(,"total_tokens":)" +
                            std::to_string(prompt_tokens + completion_tokens) + "," + details + "}";
  const std::string finish_reason = truncated ? "length" : "stop";
  if (s.kind == "stream" || s.kind == "stream_cut") {
    res.set(http::field::content_type, "text/event-stream");
    const std::string head =
        R"({"id":"chatcmpl-fake)" + id +
        R"(","object":"chat.completion.chunk","created":1795959725,"model":")" + model +
        R"(","system_fingerprint":"fp_fake","choices":)";
    std::string sse =
        "data: " + head +
        R"([{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]})" +
        "\n\n";
    const std::size_t half = content.size() / 2;
    for (const std::string& piece : {content.substr(0, half), content.substr(half)}) {
      sse += "data: " + head + R"([{"index":0,"delta":{"content":)" + jsonString(piece) +
             R"(},"logprobs":null,"finish_reason":null}]})" + "\n\n";
      if (s.kind == "stream_cut") return finish(200, sse);
    }
    sse += "data: " + head + R"([{"index":0,"delta":{},"logprobs":null,"finish_reason":")" +
           finish_reason + R"("}]})" + "\n\n";
    sse += "data: " + head + R"([],"usage":)" + usage + "}\n\ndata: [DONE]\n\n";
    return finish(200, sse);
  }
  const std::string choices =
      s.kind == "empty_choices"
          ? "[]"
          : R"([{"index":0,"message":{"role":"assistant","content":)" + jsonString(content) +
                R"(,"refusal":null},"logprobs":null,"finish_reason":")" + finish_reason + "\"}]";
  return finish(200, R"({"id":"chatcmpl-fake)" + id +
                         R"(","object":"chat.completion","created":1795959725,"model":")" + model +
                         R"(","choices":)" + choices +
                         (s.kind == "no_usage" ? "" : ",\"usage\":" + usage) +
                         R"(,"system_fingerprint":"fp_fake"})");
}

template <typename Stream>
void serve(Stream& stream) {
  beast::flat_buffer buffer;
  for (;;) {
    // Batch input files (OpenAI's upload) run to hundreds of MB; Beast's default limit is 1 MB.
    http::request_parser<http::string_body> parser;
    parser.body_limit(512ull << 20);
    beast::error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec) return;
    auto req = parser.release();
    auto res = reply(req);
    http::write(stream, res, ec);
    if (ec || !req.keep_alive()) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A real provider runs on its own machines; this one shares the client's cores, so it keeps
  // what its thread per connection frees instead of returning it to the kernel after each
  // request (glibc trims each thread's arena: madvise and TLB flushes on every core).
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  unsigned short port = 0;
  std::string cert, key;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: assay_fake_llm_server [--port N] [--cert PEM --key PEM] [--api-key KEY]\n"
          "A fake OpenAI (/v1/chat/completions) and Anthropic (/v1/messages) provider for tests;\n"
          "prints LISTENING <port>, serves until SIGTERM or stdin closes. Markers in the prompt:\n"
          "[[fake-status:429]] [[fake-retry-after:45]] [[fake-delay-ms:300]] [[fake-score:3]]\n"
          "[[fake-kind:truncated|fenced|refusal|error|overloaded|no_usage|null_details]];\n"
          "POST /_fake/script queues scripted replies, GET /_fake/stats counts requests.\n"
          "--delay-ms N delays unscripted replies; --call-log FILE logs every billed reply;\n"
          "--request-log FILE appends every API request body, one per line;\n"
          "--batch-delay-ms N: a batch (OpenAI /v1/batches, Anthropic /v1/messages/batches)\n"
          "ends N ms after it was created; --batch-create-delay-ms N [--batch-create-delay-from\n"
          "K]: the reply to the creation of batch K (default 1) and later ones comes N ms late\n"
          "(the batch exists meanwhile: a client killed then never heard its id).\n");
      return 0;
    }
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--port")
      port = static_cast<unsigned short>(std::stoi(argv[i + 1]));
    else if (a == "--cert")
      cert = argv[i + 1];
    else if (a == "--key")
      key = argv[i + 1];
    else if (a == "--api-key")
      g_api_key = argv[i + 1];
    else if (a == "--delay-ms")
      g_delay_ms = std::stoi(argv[i + 1]);
    else if (a == "--call-log")
      g_call_log = std::fopen(argv[i + 1], "a");
    else if (a == "--request-log")
      g_request_log = std::fopen(argv[i + 1], "a");
    else if (a == "--batch-delay-ms")
      g_batch_delay_ms = std::stoi(argv[i + 1]);
    else if (a == "--batch-create-delay-ms")
      g_batch_create_delay_ms = std::stoi(argv[i + 1]);
    else if (a == "--batch-create-delay-from")
      g_batch_create_delay_from = std::stol(argv[i + 1]);
  }
  std::signal(SIGPIPE, SIG_IGN);
  asio::io_context io;
  std::optional<ssl::context> ctx;
  if (!cert.empty()) {
    ctx.emplace(ssl::context::tls_server);
    ctx->use_certificate_chain_file(cert);
    ctx->use_private_key_file(key, ssl::context::pem);
  }
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::printf("LISTENING %u\n", static_cast<unsigned>(acceptor.local_endpoint().port()));
  std::fflush(stdout);
  std::thread watchdog([&] {  // stop when the parent closes our stdin
    for (;;) {
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        char buf[64];
        if (::read(STDIN_FILENO, buf, sizeof buf) <= 0) break;
      }
    }
    g_stop = true;
    beast::error_code ec;
    acceptor.close(ec);
  });
  watchdog.detach();
  while (!g_stop) {
    beast::error_code ec;
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    if (ec) break;
    ++g_open_connections;
    std::thread([s = std::move(socket), &ctx]() mutable {
      struct Open {
        ~Open() { --g_open_connections; }
      } open;
      if (ctx) {
        beast::ssl_stream<tcp::socket> tls(std::move(s), *ctx);
        beast::error_code hec;
        tls.handshake(ssl::stream_base::server, hec);
        if (!hec) serve(tls);
      } else {
        serve(s);
      }
    }).detach();
  }
  return 0;
}
