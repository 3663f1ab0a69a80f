#pragma once
/// The call protocol's reply side, one attempt: how the LLM judge (llm_judge.cpp) and the
/// bakeoff (cli/bakeoff/run.cpp) both read what a provider answered. The request side is
/// provider.hpp's buildRequest; the money side is the budget store's reserve, then settle or
/// release (budget.hpp).

#include <optional>

#include "judges/llm/http_client.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/provider.hpp"
#include "judges/llm/retry.hpp"

namespace assay::llm {

struct AttemptRead {
  /// The reply parsed (provider.hpp's parseReply); empty (not ok) when there was no HTTP
  /// response at all.
  ProviderReply reply;
  /// A failure (`!reply.ok`) that reports tokens: the provider billed it, so it is charged with
  /// them and never retried (the reservation covers one call). nullopt otherwise.
  std::optional<TokenUsage> billed_failure;
  /// What the retry policy and the circuit breaker read: the status the failure stands for (0:
  /// no response), a timeout, Anthropic's overloaded, Retry-After (RFC 9110 §10.2.3, parsed
  /// against now), and whether retrying cannot help (a permanent error, a refusal, a billed
  /// failure).
  AttemptResult attempt;
};

/// Reads one attempt's response. Never throws.
AttemptRead readAttempt(Provider provider, const HttpResponse& res);

}  // namespace assay::llm
