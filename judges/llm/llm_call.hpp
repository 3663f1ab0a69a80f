#pragma once
/// One LLM judge call in flight (internal to llm_judge.cpp and llm_batch.cpp).

#include <atomic>
#include <boost/intrusive/list.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/event.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/ledger.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/llm/prompt.hpp"
#include "judges/redaction.hpp"

namespace assay::llm {

/// `fn` as a timer, HTTP or ledger callback of a batch judge that does nothing once the judge is
/// gone, and that ~LlmJudge waits for while it runs (JudgeLife::close): a batch's settlement
/// finishes its calls (whose done() may let the owner destroy the judge) and then still logs
/// and counts. Arguments are passed on (HttpResponse, BudgetStore&).
template <class Fn>
auto ifAlive(const std::shared_ptr<JudgeLife>& life, Fn fn) {
  return [life, fn = std::move(fn)](auto&&... args) mutable {
    JudgeLife::Active active(*life);
    if (active) fn(std::forward<decltype(args)>(args)...);
  };
}

/// 64 random bits drawn once per process, in hex.
inline const std::string& processNonce() {
  static const std::string nonce = [] {
    std::random_device rd;
    const std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return std::string(buf);
  }();
  return nonce;
}

/// The verdict store's key for a call (docs/configuration.md, "The verdict store"): 32 hex
/// digits of XXH3-128 over the judge's version, the request body as sent (model, rubric,
/// prompt with the event's text) and the event id, each prefixed by its length. A redelivered
/// event (the same bytes) finds its verdict; an event that reuses another's id with other
/// content, or a canary event with a production event's id, does not: a stored verdict is only
/// ever re-emitted for the prompt it answered. Fixed size whatever the id's length.
std::string verdictStoreKey(std::string_view version, std::string_view body,
                            std::string_view event_id);
/// The same into `out` (assigned: its capacity kept).
void verdictStoreKey(std::string_view version, std::string_view body, std::string_view event_id,
                     std::string& out);

/// `text` with every occurrence of `key` replaced: a provider's error message may quote the
/// key it refused, and error messages reach the judgments and the logs.
inline std::string redactKey(std::string text, const std::string& key,
                             std::string_view mark = "[redacted]") {
  if (key.size() < 4) return text;
  // Searched on after each replacement: a key found inside "[redacted]" ("acted") would be
  // replaced again for ever.
  for (std::size_t at = 0; (at = text.find(key, at)) != std::string::npos; at += mark.size())
    text.replace(at, key.size(), mark);
  return text;
}

/// A provider's error message fit for judgments and logs: the API key (redactKey), the
/// endpoint's credentials (the userinfo before '@' and every query parameter's value, of 4
/// bytes or more) and anything the `token` redaction detector knows (other keys, bearer
/// tokens, credential headers: judges/redaction.hpp) are replaced.
inline std::string redactSecrets(std::string text, const std::string& key,
                                 std::string_view endpoint) {
  // Each secret becomes \x01 first (no secret holds a control character: refused at load), so
  // that no secret is found inside another's "[redacted]".
  constexpr std::string_view kMark = "\x01";
  for (std::size_t at; (at = text.find(kMark)) != std::string::npos;) text.erase(at, 1);
  text = redactKey(std::move(text), key, kMark);
  std::vector<std::string> secrets;
  const auto scheme = endpoint.find("://");
  const auto authority = scheme == std::string_view::npos ? 0 : scheme + 3;
  const auto path = endpoint.find_first_of("/?#", authority);
  const auto host = endpoint.substr(
      authority, path == std::string_view::npos ? std::string_view::npos : path - authority);
  if (const auto at = host.rfind('@'); at != std::string_view::npos) {
    const auto userinfo = host.substr(0, at);
    const auto colon = userinfo.find(':');
    secrets.emplace_back(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) secrets.emplace_back(userinfo.substr(colon + 1));
  }
  if (const auto q = endpoint.find('?'); q != std::string_view::npos) {
    std::string_view query = endpoint.substr(q + 1);
    query = query.substr(0, query.find('#'));
    while (!query.empty()) {
      const auto amp = query.find('&');
      const auto param = query.substr(0, amp);
      const auto eq = param.find('=');
      secrets.emplace_back(eq == std::string_view::npos ? param : param.substr(eq + 1));
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
  }
  for (const auto& s : secrets) text = redactKey(std::move(text), s, kMark);
  for (std::size_t at = 0; (at = text.find(kMark, at)) != std::string::npos; at += 10)
    text.replace(at, 1, "[redacted]");
  static const Redactor tokens([] {
    RedactOptions o;
    o.detectors = {"token"};
    return o;
  }());
  Redactor::Session session(tokens);
  return session.apply(text);
}

/// One call's state, in one place from call() to its result. Calls are pooled (newCall): a
/// finished call's buffers (prompt, request body, keys, ids, scopes, the ledger's requests)
/// keep their capacity for the next one, so that once the pool is warm a call's request path
/// allocates nothing on the caller's thread (docs/ARCHITECTURE.md, "Asynchronous judges: the
/// LLM judges").
struct LlmJudge::Call {
  std::vector<ScopeLimit> scopes;  // the budget scopes of this call (LlmJudge::scopes)
  Prompt prompt;                   // its `system` empty: the judge's system_prompt_
  // As sent, every attempt: the HTTP client reads it where it is (an aliasing shared_ptr).
  HttpRequest request;
  // Exactly one of the two: the result (call()), or its verdict (judgeAsync(): toVerdict()).
  std::function<void(LlmCallResult)> done;
  VerdictCallback verdict_done;
  // The verdict store's key for this call (verdictStoreKey): 32 hex digits of XXH3-128 over
  // the judge's version, the request body as sent and the event id.
  std::string store_key;
  std::string day, reservation_id;
  double reserved_eur = 0;
  std::int64_t token_cost = 0;  // rate-limit weight: prompt estimate + max_tokens
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  int attempts = 0;
  std::chrono::nanoseconds on_wire{0};  // the attempts' HttpResponse::on_wire
  bool answered = false;                // a 2xx reply arrived (billed by the provider)
  bool held = false;                    // an open breaker holds it (LlmJudgeSettings::breaker_hold)
  std::int64_t ttl_ms = 0, lease_ms = 0;
  // batch: true (llm_batch.cpp): priced at the batch price; never holds a max_in_flight slot.
  bool batched = false;
  bool submitted = false;  // in a batch recorded in the store, which answers for it (abandon()
                           // leaves it be: whoever takes the batch over settles or releases it)
  std::string custom_id;   // the request's id in its batch
  // The ledger's requests of this call, filled in place (Ledger::reserve and finish read them
  // where they are).
  ReserveRequest reserve_request;
  FinishRequest finish_request;
  LlmCallResult result;  // finish(): the result, kept while the ledger records its money
  // reserve(): whether the call passes the budget queue's turn on, and settles_ when it asked.
  bool chain = false;
  std::uint64_t settles_seen = 0;
  // Holds the call while one of its callbacks is pending (a call has at most one: its steps
  // follow each other), so that the callback captures a plain pointer and fits std::function's
  // inline storage; the callback takes it back (take()). A callback that never runs (the
  // services stopped) leaves it: the pool still reaches the call (no leak report), and the
  // process is stopping.
  std::shared_ptr<Call> self;
  // In the judge's list of calls holding a reservation (LlmJudge::reserved_).
  using Hook = boost::intrusive::list_member_hook<
      boost::intrusive::link_mode<boost::intrusive::auto_unlink>>;
  Hook reserved_hook;  // unlinks itself when the call is recycled or destroyed
  bool reserved = false;

  /// Holds `c` for its pending callback: returns the pointer the callback captures.
  static Call* hold(const std::shared_ptr<Call>& c) {
    c->self = c;
    return c.get();
  }
  /// The callback's `c`: the hold taken back.
  static std::shared_ptr<Call> take(Call* c) { return std::move(c->self); }
};

/// The calls holding a reservation, not yet settled (LlmJudge::reserved_; guarded by its mu_):
/// linked through the calls themselves, nothing allocated per call.
struct LlmJudge::ReservedCalls {
  boost::intrusive::list<Call,
                         boost::intrusive::member_hook<Call, Call::Hook, &Call::reserved_hook>,
                         boost::intrusive::constant_time_size<false>>
      list;
  void insert(Call& c) {
    if (!c.reserved) list.push_back(c);
    c.reserved = true;
  }
  void erase(Call& c) {
    if (c.reserved) list.erase(list.iterator_to(c));
    c.reserved = false;
  }
  /// Unlinks every call (abandon(): a late finish() of one then finds it unlinked).
  void clear() {
    list.clear_and_dispose([](Call* c) { c->reserved = false; });
  }
  ~ReservedCalls() { clear(); }  // the calls a stop abandoned may outlive the judge
};

/// A call from the process's pool of calls, reset, its buffers' capacity kept (llm_judge.cpp).
/// At most 4,096 finished calls are kept, with at most 8 MiB of prompt and body buffers in all
/// (a burst of large prompts is given back once judged).
std::shared_ptr<LlmJudge::Call> newCall();
/// The prompt and body bytes the pool's finished calls keep (capacity), at most 8 MiB.
std::size_t pooledCallBytes();

}  // namespace assay::llm
