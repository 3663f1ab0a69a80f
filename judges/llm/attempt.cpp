#include "judges/llm/attempt.hpp"

#include <chrono>

namespace assay::llm {

AttemptRead readAttempt(Provider provider, const HttpResponse& res) {
  AttemptRead a;
  if (res.status != 0) a.reply = parseReply(provider, res.status, res.body);
  if (a.reply.ok) return a;
  if (a.reply.usage && (a.reply.usage->prompt_tokens > 0 || a.reply.usage->completion_tokens > 0))
    a.billed_failure = a.reply.usage;
  a.attempt.status = res.status != 0 ? a.reply.effective_status : 0;
  a.attempt.timed_out = res.timed_out;
  a.attempt.overloaded = a.reply.overloaded;
  a.attempt.permanent = a.reply.permanent || a.reply.refused || a.billed_failure.has_value();
  if (auto it = res.headers.find("retry-after"); it != res.headers.end())
    a.attempt.retry_after = parseRetryAfter(it->second, std::chrono::system_clock::now());
  return a;
}

}  // namespace assay::llm
