#pragma once
/// Request bodies and reply parsing for the two provider APIs:
///  - `openai`: OpenAI chat completions (POST {endpoint}/chat/completions, `Authorization:
///    Bearer`), also spoken by Azure-style gateways, vLLM, Ollama, llama.cpp server and Mistral;
///    temperature 0 and the reply format of `ReplyFormat` (`response_format`).
///  - `anthropic`: Anthropic Messages (POST {endpoint}/v1/messages, `x-api-key`,
///    `anthropic-version: 2023-06-01`); temperature 0; a schema-constrained reply is a forced
///    tool call whose input is the reply, otherwise the JSON-only rule is the system prompt's.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "judges/llm/http_client.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/prompt.hpp"
#include "judges/llm/verdict.hpp"

namespace assay::llm {

enum class Provider { kOpenAi, kAnthropic };

/// What the reply must be, and how the request says so.
struct ReplyFormat {
  enum class Kind {
    kJsonObject,  ///< OpenAI `response_format: {"type": "json_object"}` (JSON mode, the fallback)
    kText,        ///< free text (a bakeoff arm's generation): no response_format
    /// A reply constrained to `schema`. OpenAI structured outputs, `response_format: {"type":
    /// "json_schema", "json_schema": {"name", "schema", "strict": true}}`
    /// (https://platform.openai.com/docs/guides/structured-outputs), which Ollama (0.5+),
    /// llama.cpp server and vLLM also honour with a grammar; Anthropic: one tool named
    /// `schema_name` whose `input_schema` is the schema, forced by `tool_choice: {"type": "tool"}`
    /// (https://docs.anthropic.com/en/docs/build-with-claude/tool-use): parseReply() returns the
    /// tool call's input as the reply's content.
    kJsonSchema,
  };
  Kind kind = Kind::kJsonObject;
  std::string schema_name{};  ///< kJsonSchema: [a-zA-Z0-9_-]{1,64}
  std::string schema{};       ///< kJsonSchema: the JSON Schema, as JSON text
  double temperature = 0;     ///< 0 for every judge; a generation may ask for more
};

/// OpenAI's reasoning models, which refuse `max_tokens` and any temperature but the default:
/// case-insensitive, after any "vendor/" prefix, names starting with "o1", "o3", "o4" or
/// "gpt-5". Their requests carry `max_completion_tokens` and no temperature (their reasoning
/// tokens count against that cap: give them a larger `max_tokens`).
bool isReasoningModel(std::string_view model);

/// The HTTP request for one judge call (url, headers, JSON body); `timeout` is left default.
/// `format` (default: a JSON object at temperature 0): `response_format` for OpenAI, the forced
/// tool for Anthropic's kJsonSchema (its kJsonObject and kText send nothing: the system prompt
/// says what to write). The temperature goes to both APIs, except to a reasoning model.
/// The URL of `path` ("/chat/completions", "/files", "/messages"…) under `endpoint`: the path
/// goes before the endpoint's query, which is kept (an Azure or gateway endpoint may carry
/// "?api-version=…" or "?api-key=…"). "/messages" (Anthropic) becomes "/v1/messages" unless the
/// endpoint ends in "/v1". Example: ("https://h/v1?api-key=k", "/chat/completions") ->
/// "https://h/v1/chat/completions?api-key=k".
std::string endpointUrl(std::string_view endpoint, std::string_view path);

HttpRequest buildRequest(Provider provider, const std::string& endpoint, const std::string& api_key,
                         const std::string& model, const Prompt& prompt, int max_tokens,
                         const ReplyFormat& format = {});

/// buildRequest's fixed parts for one judge, built once: the URL, the headers and the body
/// around the user message (model, temperature, reply format, system prompt). request() then
/// writes only the user message, as JSON, between them: the same bytes as buildRequest with
/// that system prompt (tests/llm/prompt_test.cpp checks), without parsing the reply schema or
/// escaping the system prompt for every call.
class RequestTemplate {
 public:
  RequestTemplate(Provider provider, const std::string& endpoint, const std::string& api_key,
                  const std::string& model, const std::string& system, int max_tokens,
                  const ReplyFormat& format = {});
  /// The request for a prompt whose system part is the template's.
  HttpRequest request(const std::string& user) const;
  /// The same into `out`, every member assigned (a reused request keeps its buffers' capacity:
  /// nothing is allocated once they are large enough).
  void fill(std::string_view user, HttpRequest& out) const;

 private:
  HttpRequest fixed_;  // url and headers; body empty
  std::string before_, after_;
};

struct ProviderReply {
  bool ok = false;      ///< a readable assistant message (2xx), verdict or not
  std::string content;  ///< assistant text (ok)
  FinishReason finish = FinishReason::kOther;
  std::optional<TokenUsage> usage;  ///< as reported; nullopt when missing
  std::string error_type;           ///< provider error type/code when !ok, e.g. "rate_limit_error"
  std::string error_message;        ///< provider error message when !ok (logs only), ≤ 300 bytes
  bool overloaded = false;          ///< Anthropic `overloaded_error`, wherever it came
  /// When !ok: the HTTP status the failure stands for, which decides retries and the circuit
  /// breaker. The response's own status, except in a 2xx body: an error object there (gateways
  /// answer 200 with `{"error": …}`; a stream's `error` event) stands for the status its
  /// numeric code or its type names (rate limit 429, overloaded 529, server/api error 500,
  /// authentication 401, permission 403, not found 404, invalid request 400); an unreadable
  /// body, no choices or a stream that stops before its end stands for 502 (a bad gateway:
  /// retrying can help).
  int effective_status = 0;
  /// Retrying cannot help although the status says it could: OpenAI's 429
  /// `insufficient_quota` (the account is out of credit) and billing errors.
  bool permanent = false;
  /// The provider's content filter declined the request or the reply (OpenAI/Azure
  /// `content_filter`, `content_policy_violation`, in any status): outcome `refused`.
  bool refused = false;
};

/// Parses a response body of `status`. Never throws. Accepted 2xx shapes: the API's JSON
/// object, and its server-sent-event stream (`data: {chunk}` lines ending with `data: [DONE]`
/// for OpenAI; `event:`/`data:` pairs from `message_start` to `message_stop` for Anthropic),
/// assembled into the same reply (text deltas concatenated, the last finish reason, the
/// usage the stream reports). A message whose content is an array of text parts (gateways) is
/// read as their concatenation. An Anthropic `tool_use` block (a forced tool, ReplyFormat's
/// kJsonSchema) is read as its input, serialized as JSON: that is the reply's content, in place of
/// any text. Everything else is !ok with an `effective_status`.
ProviderReply parseReply(Provider provider, int status, const std::string& body);
}  // namespace assay::llm
