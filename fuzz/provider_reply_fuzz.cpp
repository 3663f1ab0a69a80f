// libFuzzer target: the LLM reply side (judges/llm/provider.hpp, judges/llm/verdict.hpp). The
// first byte picks the provider API and the status class; the rest is the response body, read
// by parseReply and, when it yields a message, by parseVerdict on a 1..4 rubric. The body is
// also read directly as a verdict. Never a crash; a verdict that is ok has a score in range; a
// usage read from the reply has every count in [0, 100 M] (pricing.cpp: past that it is
// garbage, and 10^12 tokens once made the ledger's settle throw); a justification is UTF-8.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.hpp"
#include "judges/llm/provider.hpp"
#include "judges/llm/verdict.hpp"

namespace {

void checkVerdict(const assay::llm::LlmVerdict& v) {
  if (v.outcome == assay::Outcome::kOk && (!v.score || *v.score < 1 || *v.score > 4))
    __builtin_trap();
  if (!assay::isValidUtf8(v.justification)) __builtin_trap();
}

void checkUsage(const std::optional<assay::llm::TokenUsage>& u) {
  if (!u) return;
  constexpr std::int64_t kMax = 100'000'000;
  for (const std::int64_t n : {u->prompt_tokens, u->completion_tokens, u->cached_prompt_tokens,
                               u->cache_write_prompt_tokens, u->reasoning_tokens})
    if (n < 0 || n > 3 * kMax) __builtin_trap();  // Anthropic's prompt sums three counts
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace assay::llm;
  if (size == 0) return 0;
  const Provider provider = (data[0] & 1) ? Provider::kAnthropic : Provider::kOpenAi;
  static constexpr int kStatuses[] = {200, 200, 200, 400, 401, 429, 500, 529};
  const int status = kStatuses[(data[0] >> 1) & 7];
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto reply = parseReply(provider, status, body);
  checkUsage(reply.usage);
  if (reply.ok) {
    checkVerdict(parseVerdict(reply.content, reply.finish, 1, 4));
  } else if (reply.effective_status < 400 && status >= 400) {
    __builtin_trap();  // an error status never stands for a success
  }
  checkVerdict(parseVerdict(body, FinishReason::kStop, 1, 4));
  return 0;
}
