#pragma once
/// Request bodies and reply parsing for the two provider APIs:
///  - `openai`: OpenAI chat completions (POST {endpoint}/chat/completions, `Authorization:
///    Bearer`), also spoken by Azure-style gateways, vLLM, Ollama, llama.cpp server and Mistral;
///    temperature 0 and `response_format: {"type": "json_object"}`.
///  - `anthropic`: Anthropic Messages (POST {endpoint}/v1/messages, `x-api-key`,
///    `anthropic-version: 2023-06-01`); temperature 0, the JSON-only rule in the system prompt.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "judges/llm/http_client.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/prompt.hpp"
#include "judges/llm/verdict.hpp"

namespace assay::llm {

enum class Provider { kOpenAi, kAnthropic };

/// The HTTP request for one judge call (url, headers, JSON body); `timeout` is left default.
HttpRequest buildRequest(Provider provider, const std::string& endpoint, const std::string& api_key,
                         const std::string& model, const Prompt& prompt, int max_tokens);

struct ProviderReply {
  bool ok = false;      ///< a 2xx with a readable message
  std::string content;  ///< assistant text (ok)
  FinishReason finish = FinishReason::kOther;
  std::optional<TokenUsage> usage;  ///< as reported; nullopt when missing
  std::string error_type;           ///< provider error type/code when !ok, e.g. "rate_limit_error"
  std::string error_message;        ///< provider error message when !ok (logs only)
  bool overloaded = false;          ///< Anthropic `overloaded_error`
};

/// Parses a response body of `status`. Never throws; an unreadable 2xx body is !ok with
/// error_type "bad_response".
ProviderReply parseReply(Provider provider, int status, const std::string& body);

}  // namespace assay::llm
