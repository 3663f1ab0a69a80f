// XXH3's streaming state on the stack (verdictStoreKey): no allocation per call.
#define XXH_STATIC_LINKING_ONLY
#include "judges/llm/llm_judge.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <unordered_set>

#include "core/clock.hpp"
#include "core/json_limits.hpp"
#include "core/log_text.hpp"
#include "core/rate_limited_log.hpp"
#include "core/utf8.hpp"
#include "judges/llm/attempt.hpp"
#include "judges/llm/llm_batch.hpp"
#include "judges/llm/llm_call.hpp"
#include "judges/llm/prompt.hpp"

namespace assay::llm {

std::string verdictStoreKey(std::string_view version, std::string_view body,
                            std::string_view event_id) {
  std::string key;
  verdictStoreKey(version, body, event_id, key);
  return key;
}

void verdictStoreKey(std::string_view version, std::string_view body, std::string_view event_id,
                     std::string& out) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  for (const std::string_view part : {version, body, event_id}) {
    const std::uint64_t size = part.size();
    XXH3_128bits_update(&state, &size, sizeof size);
    XXH3_128bits_update(&state, part.data(), part.size());
  }
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  out.assign(buf, 32);
}

namespace {

/// Blocks of one size (a call's shared_ptr control block), recycled: at most kKept kept, on a
/// list never destroyed (a call released while the process exits still finds it).
template <class T>
struct RecyclingAllocator {
  using value_type = T;
  static constexpr std::size_t kKept = 4096;
  RecyclingAllocator() = default;
  template <class U>
  explicit RecyclingAllocator(const RecyclingAllocator<U>&) {}
  struct Free {
    std::mutex mu;
    std::vector<void*> blocks;
  };
  static Free& free() {
    static auto* f = new Free;
    return *f;
  }
  T* allocate(std::size_t n) {
    if (n == 1) {
      Free& f = free();
      std::lock_guard lock(f.mu);
      if (!f.blocks.empty()) {
        void* p = f.blocks.back();
        f.blocks.pop_back();
        return static_cast<T*>(p);
      }
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) {
    if (n == 1) {
      Free& f = free();
      std::lock_guard lock(f.mu);
      if (f.blocks.size() < kKept) {
        f.blocks.push_back(p);
        return;
      }
    }
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const {
    return true;
  }
};

/// The process's finished calls, kept for the next ones (newCall). Every call it ever made is
/// in `all` until it is deleted: a call whose callback was abandoned at a stop (it holds itself,
/// Call::self) stays reachable, not a leak.
class CallPool {
 public:
  using Call = LlmJudge::Call;
  static constexpr std::size_t kKept = 4096;  ///< finished calls kept at most
  /// Their prompt and body buffers kept at most, all calls together: 1,600 calls of a dev
  /// event (about 5 KB each), 170 of prompts near the default max_input_tokens (48 KB). A
  /// backlog's burst of large prompts is given back once it has been judged.
  static constexpr std::size_t kKeptBytes = 8u << 20;
  static CallPool& instance() {
    static auto* pool = new CallPool;  // never destroyed, like the allocator's list
    return *pool;
  }
  std::shared_ptr<Call> take() {
    Call* c = nullptr;
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        c = free_.back();
        free_.pop_back();
        free_bytes_ -= bytesOf(*c);
      }
    }
    if (!c) {
      auto fresh = std::make_unique<Call>();
      {
        std::lock_guard lock(mu_);
        all_.insert(fresh.get());
      }
      c = fresh.release();
    }
    return std::shared_ptr<Call>(c, Recycle{}, RecyclingAllocator<Call>());
  }
  std::size_t bytes() {
    std::lock_guard lock(mu_);
    return free_bytes_;
  }

 private:
  struct Recycle {
    void operator()(Call* c) const { instance().give(c); }
  };
  static std::size_t bytesOf(const Call& c) {
    return c.prompt.user.capacity() + c.request.body.capacity();
  }
  /// Back to its defaults, its buffers kept (emptied); deleted instead when the pool holds
  /// kKept calls or kKeptBytes of buffers already.
  void give(Call* c) {
    const std::size_t bytes = bytesOf(*c);
    {
      std::lock_guard lock(mu_);
      if (free_.size() >= kKept || free_bytes_ + bytes > kKeptBytes) {
        all_.erase(c);
        delete c;  // NOLINT(cppcoreguidelines-owning-memory): the pool owns its calls
        return;
      }
    }
    Call fresh;
    const auto keep = [](auto& to, auto& from) {
      to.swap(from);
      to.clear();
    };
    keep(fresh.scopes, c->scopes);
    keep(fresh.prompt.user, c->prompt.user);
    keep(fresh.request.url, c->request.url);
    keep(fresh.request.method, c->request.method);
    keep(fresh.request.headers, c->request.headers);
    keep(fresh.request.body, c->request.body);
    keep(fresh.store_key, c->store_key);
    keep(fresh.day, c->day);
    keep(fresh.reservation_id, c->reservation_id);
    keep(fresh.custom_id, c->custom_id);
    const auto keepLedgerRequest = [&keep](auto& to, auto& from) {  // the members both share
      keep(to.scopes, from.scopes);
      keep(to.day, from.day);
      keep(to.reservation_id, from.reservation_id);
      keep(to.event_id, from.event_id);
      keep(to.judge, from.judge);
    };
    keepLedgerRequest(fresh.reserve_request, c->reserve_request);
    keepLedgerRequest(fresh.finish_request, c->finish_request);
    if (c->reserved_hook.is_linked()) c->reserved_hook.unlink();  // never, as abandon() clears
    *c = std::move(fresh);
    std::lock_guard lock(mu_);
    free_.push_back(c);
    free_bytes_ += bytes;
  }

  std::mutex mu_;
  std::vector<Call*> free_;
  std::size_t free_bytes_ = 0;  // bytesOf() of the calls in free_
  std::unordered_set<Call*> all_;
};

}  // namespace

std::shared_ptr<LlmJudge::Call> newCall() { return CallPool::instance().take(); }
std::size_t pooledCallBytes() { return CallPool::instance().bytes(); }

using Steady = std::chrono::steady_clock;

std::string modelFamily(std::string_view model) {
  std::string m;
  for (char c : model.substr(model.rfind('/') + 1))  // "openai/gpt-4o" (a router's name)
    m.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  static constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {
      {"gpt-3.5", "openai"},    {"gpt-4", "openai"},    {"gpt-5", "openai"},
      {"gpt-oss", "openai"},    {"chatgpt", "openai"},  {"o1", "openai"},
      {"o3", "openai"},         {"o4", "openai"},       {"claude", "claude"},
      {"gemini", "gemini"},     {"llama", "llama"},     {"meta-llama", "llama"},
      {"mistral", "mistral"},   {"mixtral", "mistral"}, {"ministral", "mistral"},
      {"codestral", "mistral"}, {"qwen", "qwen"},       {"deepseek", "deepseek"}};
  for (const auto& [prefix, family] : kPrefixes)
    if (m.starts_with(prefix)) return std::string(family);
  // Otherwise the name's first word: "gpt2", "t5", "ctrl", "gpt" (of "gpt-j-6b": EleutherAI's,
  // not OpenAI's, which the table names "openai").
  return m.substr(0, m.find_first_of(" -_.:(/"));
}

std::string tooLongText(const Rubric& r) {
  return r.fields.empty() && !r.needs_reference
             ? "question and answer exceed max_input_tokens"
             : "the material without any context (question, answer, reference, JSON Pointer "
               "inputs) exceeds max_input_tokens";
}

ReplyFormat replyFormatOf(const LlmJudgeSettings& s) {
  ReplyFormat f;
  f.kind = s.reply_format;
  if (f.kind == ReplyFormat::Kind::kJsonSchema) {
    f.schema_name = "verdict";
    f.schema = replySchema(s.rubric);
  }
  return f;
}

namespace {

/// A settled call's outcome as the verdict store keeps it (a redelivery re-emits it): JSON.
std::string serializeResult(const LlmCallResult& r) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("outcome");
  w.String(std::string(outcomeName(r.verdict.outcome)));
  w.Key("score");
  if (r.verdict.score)
    w.Int(*r.verdict.score);
  else
    w.Null();
  w.Key("justification");
  w.String(r.verdict.justification);
  if (r.verdict.unsupported_claim) {
    w.Key("unsupported_claim");
    w.String(*r.verdict.unsupported_claim);
  }
  w.Key("contexts_truncated");
  w.Bool(r.contexts_truncated);
  // What the first call cost, for an audit of the store (a re-emission charges nothing).
  w.Key("input_tokens");
  w.Int64(r.usage.prompt_tokens);
  w.Key("output_tokens");
  w.Int64(r.usage.completion_tokens);
  w.Key("cost_eur");
  w.Double(r.cost_eur);
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

/// A stored verdict as this call's result: no call, no tokens, no charge.
LlmCallResult storedResult(const std::string& json, Steady::time_point started) {
  LlmCallResult r;
  r.from_store = true;
  r.usage.reported = true;
  r.latency = std::chrono::duration_cast<Millis>(Steady::now() - started);
  rapidjson::Document d;
  if (jsonShapeProblem(json) || d.Parse(json.data(), json.size()).HasParseError() ||
      !d.IsObject() || !d.HasMember("outcome") || !d["outcome"].IsString()) {
    r.verdict.outcome = Outcome::kSchemaError;
    r.verdict.justification = "the stored verdict of this event is unreadable";
    return r;
  }
  const std::string_view outcome = d["outcome"].GetString();
  r.verdict.outcome = Outcome::kSchemaError;
  for (int o = 0; o < kOutcomeCount; ++o)
    if (outcomeName(static_cast<Outcome>(o)) == outcome)
      r.verdict.outcome = static_cast<Outcome>(o);
  if (d.HasMember("score") && d["score"].IsInt()) r.verdict.score = d["score"].GetInt();
  if (r.verdict.outcome == Outcome::kOk && !r.verdict.score)
    r.verdict.outcome = Outcome::kSchemaError;
  if (d.HasMember("justification") && d["justification"].IsString())
    r.verdict.justification = d["justification"].GetString();
  if (d.HasMember("unsupported_claim") && d["unsupported_claim"].IsString())
    r.verdict.unsupported_claim = d["unsupported_claim"].GetString();
  r.contexts_truncated = d.HasMember("contexts_truncated") && d["contexts_truncated"].IsBool() &&
                         d["contexts_truncated"].GetBool();
  return r;
}

}  // namespace

LlmJudge::LlmJudge(LlmJudgeSettings settings, CallServices& services)
    : settings_(std::move(settings)),
      endpoint_shown_(safeUrl(settings_.endpoint)),
      format_(replyFormatOf(settings_)),
      system_prompt_(systemPrompt(settings_.rubric)),
      request_(settings_.provider, settings_.endpoint, settings_.api_key, settings_.model,
               system_prompt_, settings_.max_tokens, format_),
      services_(services),
      client_(services.client(settings_.ca_file)),
      ledger_(services.ledger()),
      stats_(services.stats().forJudge(settings_.name, settings_.version, settings_.model)),
      policy_(settings_.retry, std::hash<std::string>{}(settings_.name)),
      breaker_(settings_.breaker_failures, settings_.breaker_open),
      reserved_(std::make_unique<ReservedCalls>()) {
  // A wave of max_in_flight calls reuses its connections (docs/BENCHMARKS.md, LLM dispatch).
  client_.keepIdle(static_cast<std::size_t>(std::max(0, settings_.max_in_flight)));
  if (settings_.batch) batch_ = std::make_unique<LlmBatch>(*this);
  if (isPlainRemoteHttp(settings_.endpoint))
    spdlog::warn(
        "llm judge '{}': insecure_http: the API key and the events' text go to {} unencrypted",
        settings_.name, endpoint_shown_);
  if (settings_.requests_per_minute > 0)
    rpm_.emplace(settings_.requests_per_minute, std::max(1.0, settings_.requests_per_minute / 6),
                 Steady::now());
  if (settings_.tokens_per_minute > 0)
    tpm_.emplace(settings_.tokens_per_minute, std::max(1.0, settings_.tokens_per_minute / 6),
                 Steady::now());
  services.addScope("global", settings_.global_daily_limit_eur);  // a reload may change it
  if (settings_.daily_limit_eur > 0)
    services.addScope("judge:" + settings_.name, settings_.daily_limit_eur);
  // The tenants and apps named under budget: their series from the start ("*": on first use);
  // those a reload left uncapped lose theirs.
  services.retireScopes("tenant", settings_.tenant_caps);
  services.retireScopes("app", settings_.app_caps);
  for (const auto& [name, cap] : settings_.tenant_caps)
    if (name != "*") services.addScope("tenant:" + name, cap);
  for (const auto& [name, cap] : settings_.app_caps)
    if (name != "*") services.addScope("app:" + name, cap);
  services.addJudge(this);
  spdlog::info("llm judge '{}': {} {} via {} ({}), {} in flight at most", settings_.name,
               settings_.rubric.criterion, settings_.model, endpoint_shown_,
               settings_.provider == Provider::kAnthropic ? "anthropic" : "openai",
               settings_.max_in_flight);
}

namespace {
// The batch callbacks this thread is inside, per judge (a done() run inside one may destroy
// the judge on this very thread: close() must not wait for itself).
thread_local std::vector<const JudgeLife*> t_inside;
}  // namespace

JudgeLife::Active::Active(JudgeLife& l) : life_(l) {
  std::lock_guard lock(l.mu_);
  if (!l.alive_) return;
  ++l.active_;
  entered_ = true;
  t_inside.push_back(&l);
}

JudgeLife::Active::~Active() {
  if (!entered_) return;
  t_inside.erase(std::find(t_inside.begin(), t_inside.end(), &life_));
  std::lock_guard lock(life_.mu_);
  --life_.active_;
  life_.cv_.notify_all();
}

void JudgeLife::close() {
  const auto own = std::count(t_inside.begin(), t_inside.end(), this);
  std::unique_lock lock(mu_);
  alive_ = false;
  cv_.wait(lock, [&] { return active_ <= own; });
}

LlmJudge::~LlmJudge() {
  alive_->close();  // batch callbacks still scheduled now do nothing; running ones have ended
  services_.removeJudge(this);
}

std::vector<LlmJudge::Abandoned> LlmJudge::abandon() const {
  std::vector<Abandoned> out;
  std::lock_guard lock(mu_);
  // A submitted batch request keeps its reservation and lease: the batch is paid whether this
  // instance waits or not, and whichever instance takes the batch over settles it.
  for (const Call& c : reserved_->list)
    if (!c.submitted) out.push_back({c.reservation_id, c.day, c.store_key, c.scopes});
  reserved_->clear();
  waiting_.clear();
  if (batch_) batch_->clearOpen();
  return out;
}

std::optional<std::chrono::seconds> LlmJudge::maxSilence() const {
  using std::chrono::seconds;
  const auto& s = settings_;
  if (s.batch) {
    // OpenAI's and Anthropic's batches end within 24 hours (completion_window "24h"; Anthropic
    // expires a batch after 24 hours), their results read at the next poll.
    return std::chrono::duration_cast<seconds>(s.batch_max_wait + 2 * s.batch_poll) +
           std::chrono::hours(25);
  }
  const int attempts = std::max(s.retry.max_attempts, 1);
  const Millis longest = s.timeout * attempts + s.retry.max_retry_wait * (attempts - 1) +
                         kMaxBudgetWait + s.breaker_hold;
  return std::max(seconds(300), std::chrono::duration_cast<seconds>(2 * longest));
}

int LlmJudge::inFlight() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

std::vector<ScopeLimit> LlmJudge::baseScopes() const {
  std::vector<ScopeLimit> s;
  baseScopes(s);
  return s;
}

void LlmJudge::baseScopes(std::vector<ScopeLimit>& s) const {
  s.resize(settings_.daily_limit_eur > 0 ? 2 : 1);  // assigned in place: capacity kept
  s[0].scope = "global";
  s[0].daily_limit_eur = settings_.global_daily_limit_eur;
  if (s.size() == 2) {
    s[1].scope.assign("judge:").append(settings_.name);
    s[1].daily_limit_eur = settings_.daily_limit_eur;
  }
}

void LlmJudge::scopes(const Event& event, std::vector<ScopeLimit>& s) const {
  baseScopes(s);
  const auto add = [&](const char* kind, const std::string& value,
                       const std::vector<std::pair<std::string, double>>& caps) {
    if (caps.empty()) return;
    const std::string& raw = value.empty() ? std::string("none") : value;
    const double* cap = nullptr;
    for (const auto& [key, euros] : caps)
      if (key == raw || (key == "*" && !cap)) cap = &euros;
    if (!cap) return;
    // The scope's name goes into Redis keys, metric labels and log lines: control characters
    // escaped (core/log_text.hpp); a long name cut, with a hash of the whole so that two
    // tenants sharing their first bytes keep two budgets.
    std::string name = logText(raw, kMaxScopeNameBytes);
    if (raw.size() > kMaxScopeNameBytes)
      name += fmt::format("#{:08x}", XXH3_64bits(raw.data(), raw.size()) >> 32);
    const std::string scope = std::string(kind) + ":" + name;
    s.push_back({scope, *cap});
    services_.ensureScope(scope, *cap, kMaxScopeSeries);
  };
  add("tenant", event.tenant, settings_.tenant_caps);
  add("app", event.app, settings_.app_caps);
}

// ---- The Judge interface ----------------------------------------------------------------------

Verdict LlmJudge::judge(const Event& event) const {
  std::promise<Verdict> p;
  auto f = p.get_future();
  judgeAsync(event, [&p](Verdict v) { p.set_value(std::move(v)); });
  return f.get();
}

void LlmJudge::warnSelfJudging(const Event& event) const {
  if (event.model.empty() || modelFamily(event.model) != modelFamily(settings_.model)) return;
  stats_.self_judging->Increment();
  if (!self_warned_.exchange(true))
    spdlog::warn(
        "llm judge '{}' ({}) judges answers of the same model family ('{}'): judges prefer "
        "their own family's answers; judge with another family",
        settings_.name, settings_.model, logText(event.model, 80));
}

void LlmJudge::judgeAsync(const Event& event, VerdictCallback done) const {
  warnSelfJudging(event);
  ++services_.pending();
  begin(event, {}, std::move(done));
}

Verdict LlmJudge::toVerdict(const LlmCallResult& r) const {
  Verdict v;
  v.outcome = r.verdict.outcome;
  if (r.verdict.outcome == Outcome::kOk) v.score = *r.verdict.score;
  v.evidence = r.verdict.justification;
  if (r.verdict.unsupported_claim && settings_.rubric.names_claim)
    v.evidence += " Unsupported: " + *r.verdict.unsupported_claim;
  v.contexts_truncated = r.contexts_truncated;
  v.stored = r.from_store;
  v.model = settings_.model;
  v.input_tokens = r.usage.prompt_tokens;
  v.output_tokens = r.usage.completion_tokens;
  v.cost_eur = r.cost_eur;
  v.tokens_estimated = !r.usage_reported;
  if (r.usage_reported) {  // an estimate is charged, but it is not a count of tokens
    const auto t = r.usage.classes();
    stats_.tokens_in->Increment(static_cast<double>(t.input));
    stats_.tokens_cached->Increment(static_cast<double>(t.cached_input));
    stats_.tokens_write->Increment(static_cast<double>(t.cache_write));
    stats_.tokens_out->Increment(static_cast<double>(t.output));
    stats_.tokens_reasoning->Increment(static_cast<double>(t.reasoning));
  }
  stats_.cost->Increment(r.cost_eur);
  if (!r.usage_reported) stats_.usage_missing->Increment();
  if (r.from_store) stats_.stored->Increment();
  if (r.store_unavailable) services_.stats().store_errors.Increment();
  services_.onCall(r.exhausted_scope, r.exhausted_cap_eur);
  --services_.pending();
  return v;
}

void LlmJudge::deliver(std::function<void(LlmCallResult)>& done, VerdictCallback& verdict_done,
                       LlmCallResult r) const {
  // Moved out first: the call goes back to the pool once its last holder lets go, and the
  // caller may destroy this judge once its callback has run.
  if (done) {
    auto d = std::move(done);
    d(std::move(r));
  } else {
    auto d = std::move(verdict_done);
    d(toVerdict(r));
  }
}

// ---- One call ---------------------------------------------------------------------------------

void LlmJudge::call(const Event& event, std::function<void(LlmCallResult)> done) const {
  begin(event, std::move(done), {});
}

void LlmJudge::begin(const Event& event, std::function<void(LlmCallResult)> done,
                     VerdictCallback verdict_done) const {
  const auto t0 = Steady::now();
  auto early = [&](Outcome o, std::string why) {
    LlmCallResult r;
    r.verdict.outcome = o;
    r.verdict.justification = std::move(why);
    r.latency = std::chrono::duration_cast<Millis>(Steady::now() - t0);
    deliver(done, verdict_done, std::move(r));
  };
  {
    std::lock_guard lock(mu_);
    if (waiting_.size() >= settings_.max_waiting)
      return early(Outcome::kRateLimited,
                   "local backlog full: " + std::to_string(settings_.max_waiting) +
                       " calls already wait for a max_in_flight slot");
  }
  if (auto missing = missingInput(settings_.rubric, event))
    return early(missing->first, std::move(missing->second));
  // Every buffer below is the pooled call's, assigned in place: nothing is allocated once the
  // pool is warm, but the request body's growth past the largest one so far.
  auto c = newCall();
  if (!buildPrompt(settings_.rubric, event, settings_.max_input_tokens, system_prompt_, c->prompt))
    return early(Outcome::kContextTooLong, tooLongText(settings_.rubric));
  c->started = t0;
  scopes(event, c->scopes);
  request_.fill(c->prompt.user, c->request);
  c->request.timeout = settings_.timeout;
  verdictStoreKey(settings_.version, c->request.body, event.id, c->store_key);
  c->token_cost = c->prompt.estimated_tokens + settings_.max_tokens;
  c->batched = settings_.batch;
  // Reserve the worst case before anything is sent (at the batch price for a batch judge).
  const auto worst = estimateUsage(c->prompt.estimated_tokens, settings_.max_tokens);
  c->reserved_eur =
      costEur(costUsd(c->batched ? batchPrice(settings_.price) : settings_.price, worst),
              settings_.usd_to_eur);
  const auto now_ms = epochMs();
  c->day = budgetDay(settings_.timezone, now_ms);
  // Unique across calls, restarts and instances: it is also the call's lease token.
  c->reservation_id.clear();
  fmt::format_to(std::back_inserter(c->reservation_id), "{}/{}/{}/{}/{}", c->store_key,
                 settings_.name, processNonce(), now_ms, sequence_++);
  // The lease lasts as long as the call can (every attempt and the longest pauses) plus 10 s;
  // the reservation another minute, so that a late settlement still finds it. An open
  // breaker's hold fits in it (llmSettingsFrom bounds breaker_hold): a longer lease would
  // also delay the events whose call a crash interrupted.
  c->lease_ms = settings_.timeout.count() * (settings_.retry.max_attempts + 1) +
                settings_.retry.max_retry_wait.count() * settings_.retry.max_attempts + 10'000;
  // A batch request waits for its batch (batch_max_wait) with a short hold; submitBatch()
  // extends it to the provider's 24 h window when the batch leaves.
  if (c->batched) c->lease_ms = settings_.batch_max_wait.count() + 30'000;
  c->ttl_ms = c->lease_ms + 50'000;
  c->done = std::move(done);
  c->verdict_done = std::move(verdict_done);
  reserve(c, false);
}

void LlmJudge::reserve(const std::shared_ptr<Call>& c, bool chain) const {
  // Assigned in place (the pooled call's buffers); the ledger reads it where it is.
  ReserveRequest& r = c->reserve_request;
  r.scopes = c->scopes;
  r.amount_eur = c->reserved_eur;
  r.day = c->day;
  r.reservation_id = c->reservation_id;
  r.ttl_ms = c->ttl_ms;
  r.lease_ms = c->lease_ms;
  r.close_on_refusal = true;
  // A redelivered event (Kafka delivers at least once) is neither called nor paid for twice:
  // the verdict store holds the (event id, judge) pair's lease while a call runs, and its
  // verdict for 48 h once the call was billed.
  r.event_id = c->store_key;
  r.judge = settings_.name;
  {
    std::lock_guard lock(mu_);
    c->settles_seen = settles_;
  }
  c->chain = chain;
  ledger_.reserve(r, [this, raw = Call::hold(c)](const ReserveAnswer& a) {
    const auto call = Call::take(raw);
    onReserved(call, a, call->chain, call->settles_seen);
  });
}

void LlmJudge::finishEarly(const std::shared_ptr<Call>& c, Outcome o, std::string why,
                           std::string scope, bool store_unavailable) const {
  LlmCallResult r;
  r.store_unavailable = store_unavailable;
  // The cap the refusal was made under: a reload that raised it since must not be undone by
  // this late answer (CallServices::onCall).
  for (const auto& l : c->scopes)
    if (l.scope == scope) r.exhausted_cap_eur = l.daily_limit_eur;
  r.exhausted_scope = std::move(scope);
  r.verdict.outcome = o;
  r.verdict.justification = std::move(why);
  r.latency = std::chrono::duration_cast<Millis>(Steady::now() - c->started);
  deliver(c->done, c->verdict_done, std::move(r));
}

void LlmJudge::onReserved(const std::shared_ptr<Call>& c, const ReserveAnswer& a, bool chain,
                          std::uint64_t settles) const {
  if (a.claim == ClaimResult::Status::kStored) {
    if (chain) retryBudgetWaiting();
    return deliver(c->done, c->verdict_done, storedResult(a.stored_verdict, c->started));
  }
  if (a.claim == ClaimResult::Status::kLeased) {
    // Another call (this event delivered to another instance too, after a rebalance) holds the
    // lease: ask again when it settles or expires, then take its verdict or the lease.
    if (chain) retryBudgetWaiting();
    const auto wait = Millis{std::clamp<std::int64_t>(a.lease_left_ms, 50, 1000)};
    client_.schedule(wait, [this, raw = Call::hold(c)] { reserve(Call::take(raw), false); });
    return;
  }
  const auto& r = a.result;
  // A call that leaves the budget queue passes the turn to the next one, unless it is still
  // "busy" (then the next one would be too: it goes back to the front and waits).
  if (chain && r.status != ReserveStatus::kBusy) retryBudgetWaiting();
  switch (r.status) {
    case ReserveStatus::kExhausted:
      return finishEarly(c, Outcome::kSkippedBudget,
                         "daily budget exhausted (" + r.exhausted_scope + ")", r.exhausted_scope);
    case ReserveStatus::kUnavailable:
      return finishEarly(c, Outcome::kSkippedBudget, "budget store unavailable: " + r.error, {},
                         /*store_unavailable=*/true);
    case ReserveStatus::kBusy: {
      // The cap has room for this call once the calls in flight settle (they reserved their
      // worst case): wait, in arrival order, for one of ours to finish, or poll when the holds
      // are another judge's or daemon's.
      if (Steady::now() - c->started > kMaxBudgetWait)
        return finishEarly(
            c, Outcome::kSkippedBudget,
            "budget held by calls in flight for too long (" + r.exhausted_scope + ")");
      bool again = false;
      {
        std::lock_guard lock(mu_);
        again = settles_ != settles;  // a hold went since the store said busy: ask again
        if (!again && in_flight_ > 0) {
          if (chain)
            budget_waiting_.push_front(c);
          else
            budget_waiting_.push_back(c);
          return;
        }
      }
      if (again) return reserve(c, chain);
      client_.schedule(kBusyPoll, [this, raw = Call::hold(c)] { reserve(Call::take(raw), false); });
      return;
    }
    case ReserveStatus::kReserved:
      break;
  }
  if (c->batched) {  // into the open batch: no max_in_flight slot
    {
      std::lock_guard lock(mu_);
      reserved_->insert(*c);
    }
    return batch_->enqueueBatch(c);
  }
  bool overflow = false;
  {
    std::lock_guard lock(mu_);
    reserved_->insert(*c);
    if (in_flight_ < settings_.max_in_flight) {
      ++in_flight_;
    } else if (waiting_.size() < settings_.max_waiting) {
      waiting_.push_back(c);
      return;
    } else {
      overflow = true;
      reserved_->erase(*c);
    }
  }
  if (overflow) {
    ledger_.finish(endOf(c, std::nullopt, std::nullopt));
    return finishEarly(c, Outcome::kRateLimited,
                       "local backlog full: " + std::to_string(settings_.max_waiting) +
                           " calls already wait for a max_in_flight slot");
  }
  start(c);
}

void LlmJudge::retryBudgetWaiting() const {
  std::shared_ptr<Call> next;
  {
    std::lock_guard lock(mu_);
    if (budget_waiting_.empty()) return;
    next = std::move(budget_waiting_.front());
    budget_waiting_.pop_front();
  }
  reserve(next, /*chain=*/true);
}

void LlmJudge::start(const std::shared_ptr<Call>& c) const { attempt(c); }

void LlmJudge::attempt(const std::shared_ptr<Call>& c) const {
  Millis wait{0};
  bool open = false;
  std::string last_failure;
  {
    std::lock_guard lock(mu_);
    const auto now = Steady::now();
    if (!breaker_.allow(now)) {
      // Half-open: the probe call is in flight; wait for its answer rather than fail.
      // Unless its hold time has passed.
      const bool past_hold = settings_.breaker_hold > Millis{0} && !c->batched &&
                             now >= c->started + settings_.breaker_hold;
      if (breaker_.state(now) == CircuitBreaker::State::kHalfOpen && !past_hold) {
        wait = Millis{100};
      } else {
        open = true;
        last_failure = last_failure_;
      }
    } else {
      if (rpm_) wait = std::max(wait, rpm_->take(1, now));
      if (tpm_ && wait == Millis{0})
        wait = std::max(wait, tpm_->take(static_cast<double>(c->token_cost), now));
    }
  }
  if (open) {
    if (const auto hold = holdFor(c)) {
      client_.schedule(*hold, [this, raw = Call::hold(c)] { attempt(Call::take(raw)); });
      return;
    }
    LlmVerdict v;
    v.outcome = Outcome::kProviderError;
    v.justification =
        "circuit breaker open: " + endpoint_shown_ + " keeps failing (last: " + last_failure + ")";
    if (settings_.breaker_hold > Millis{0} && !c->batched) {
      const auto held_s =
          std::chrono::duration_cast<std::chrono::seconds>(Steady::now() - c->started).count();
      v.justification += "; held " + std::to_string(held_s) + " s, breaker_max_hold_ms passed";
      logFailure(v.outcome, v.justification);
    }
    return finish(c, std::move(v), std::nullopt);
  }
  if (wait > Millis{0}) {
    client_.schedule(wait, [this, raw = Call::hold(c)] { attempt(Call::take(raw)); });
    return;
  }
  if (c->held) {  // the breaker lets it through (closed, or this call is the probe)
    std::lock_guard lock(mu_);
    c->held = false;
    --held_;
    stats_.held->Decrement();
    stats_.holds_released->Increment();
  }
  ++c->attempts;
  client_.submit(std::shared_ptr<const HttpRequest>(c, &c->request),
                 [this, raw = Call::hold(c)](HttpResponse res) {
                   onResponse(Call::take(raw), std::move(res));
                 });
}

std::optional<Millis> LlmJudge::holdFor(const std::shared_ptr<Call>& c) const {
  if (settings_.breaker_hold <= Millis{0} || c->batched) return std::nullopt;
  bool first = false;
  Millis wait{0};
  {
    std::lock_guard lock(mu_);
    const auto now = Steady::now();
    const auto deadline = c->started + settings_.breaker_hold;
    if (now >= deadline) {  // counted whether it was held or met the breaker past its time
      if (c->held) {
        c->held = false;
        --held_;
        stats_.held->Decrement();
      }
      stats_.holds_gave_up->Increment();
      return std::nullopt;
    }
    if (!c->held) {
      c->held = true;
      first = held_++ == 0;
      stats_.held->Increment();
    }
    // Looked at again when the breaker lets a probe through (another held call may be the
    // probe: then this one waits for its answer, 100 ms at a time), or at the deadline.
    wait = std::min(std::max(breaker_.reopensIn(now), Millis{100}),
                    std::chrono::ceil<Millis>(deadline - now));
  }
  if (first)
    spdlog::warn(
        "llm judge '{}': circuit breaker open: calls are held until {} answers again, each for "
        "at most {:g} s from its start (breaker_max_hold_ms; limits.when_full: block)",
        settings_.name, endpoint_shown_,
        static_cast<double>(settings_.breaker_hold.count()) / 1000);
  return wait;
}

void LlmJudge::onResponse(const std::shared_ptr<Call>& c, HttpResponse res) const {
  c->on_wire += res.on_wire;
  const AttemptRead read = readAttempt(settings_.provider, res);  // the call protocol's reader
  const ProviderReply& reply = read.reply;
  if (reply.ok) {
    c->answered = true;
    bool was_open = false;
    {
      std::lock_guard lock(mu_);
      was_open = breaker_.state(Steady::now()) != CircuitBreaker::State::kClosed;
      breaker_.onSuccess();
    }
    if (was_open)
      spdlog::info("llm judge '{}': {} answers again; circuit breaker closed", settings_.name,
                   endpoint_shown_);
    auto v = parseVerdict(reply.content, reply.finish, settings_.rubric.minScore(),
                          settings_.rubric.maxScore());
    flagTrimmed(c->prompt, v);
    // Missing usage: charge the conservative estimate (finish() does it).
    return finish(c, std::move(v), reply.usage ? reply.usage : std::optional<TokenUsage>{});
  }
  // A failure: an error status, an error object or a broken stream in a 2xx body, or no
  // response. It is charged only for the tokens the provider reports with it, and a failure
  // that reports tokens is not retried (the reservation covers one call, and a second call
  // for the same event would be paid twice).
  const bool billed = read.billed_failure.has_value();
  if (billed) c->answered = true;
  const auto charged = billed ? read.billed_failure : std::optional<TokenUsage>{TokenUsage{}};
  const AttemptResult& ar = read.attempt;
  RetryDecision d;
  const bool endpoint_failure = !(ar.status > 0 && ar.status < 500);
  bool hold = false;
  {
    std::lock_guard lock(mu_);
    // 4xx (429 included) is an answer, not an endpoint down: only 5xx and no-response count,
    // and a 4xx answer to the probe closes the breaker (else it would stay half-open for good).
    if (ar.status > 0 && ar.status < 500) {
      if (breaker_.state(Steady::now()) != CircuitBreaker::State::kClosed)
        spdlog::info("llm judge '{}': {} answers again (HTTP {}); circuit breaker closed",
                     settings_.name, endpoint_shown_, res.status);
      breaker_.onSuccess();
    } else {
      const auto now = Steady::now();
      const bool was_open = breaker_.state(now) != CircuitBreaker::State::kClosed;
      const bool probe = breaker_.state(now) == CircuitBreaker::State::kHalfOpen;
      breaker_.onFailure(now);
      last_failure_ = failureText(res, reply);
      if (probe && breaker_.state(now) == CircuitBreaker::State::kOpen)
        spdlog::warn(
            "llm judge '{}': the probe call to {} failed ({}); circuit breaker open again "
            "for {:g} s",
            settings_.name, endpoint_shown_, last_failure_,
            static_cast<double>(breaker_.reopensIn(now).count()) / 1000);
      if (!was_open && breaker_.state(now) == CircuitBreaker::State::kOpen)
        spdlog::warn(
            "llm judge '{}': {} failed {} times in a row (last: {}); circuit breaker open for "
            "{:g} s (calls meanwhile {})",
            settings_.name, endpoint_shown_, settings_.breaker_failures, last_failure_,
            static_cast<double>(settings_.breaker_open.count()) / 1000,
            settings_.breaker_hold > Millis{0} ? "are held" : "end as provider_error");
    }
    d = policy_.decide(c->attempts, ar);
    // Its retries spent on an endpoint that now has an open breaker: held like the calls that
    // meet the open breaker (breaker_hold), so that an outage loses nothing it may wait out.
    hold = !d.retry && endpoint_failure && !billed && !reply.refused &&
           settings_.breaker_hold > Millis{0} && !c->batched &&
           breaker_.state(Steady::now()) == CircuitBreaker::State::kOpen;
  }
  if (hold) return attempt(c);
  if (d.retry) {
    client_.schedule(d.wait, [this, raw = Call::hold(c)] { attempt(Call::take(raw)); });
    return;
  }
  LlmVerdict v;
  const bool auth = ar.status == 401 || ar.status == 403;
  v.outcome = reply.refused ? Outcome::kRefused : auth ? Outcome::kAuthError : d.give_up;
  v.justification = failureText(res, reply);
  if (v.outcome != Outcome::kRefused) logFailure(v.outcome, v.justification);
  finish(c, std::move(v), charged);
}

void LlmJudge::flagTrimmed(const Prompt& prompt, LlmVerdict& v) const {
  if (v.outcome != Outcome::kOk || !prompt.contexts_truncated ||
      !settings_.rubric.needs_every_context || settings_.score_trimmed)
    return;
  v.outcome = Outcome::kContextsTrimmed;
  v.justification = "[score " + std::to_string(*v.score) + " on contexts 1-" +
                    std::to_string(prompt.contexts_used) + " of " +
                    std::to_string(prompt.contexts_total) +
                    ", the others left out to fit max_input_tokens] " + v.justification;
  v.score.reset();
}

std::string LlmJudge::failureText(const HttpResponse& res, const ProviderReply& reply) const {
  if (res.status == 0) return res.error;
  std::string text = "HTTP " + std::to_string(res.status);
  if (!reply.error_type.empty()) text += " " + reply.error_type;
  if (!reply.error_message.empty())
    text += ": " + redactSecrets(reply.error_message, settings_.api_key, settings_.endpoint);
  return text;
}

void LlmJudge::logFailure(Outcome outcome, const std::string& why) const {
  long suppressed = 0;
  if (!failure_log_.allow(suppressed)) return;
  if (outcome == Outcome::kAuthError)
    spdlog::error(
        "llm judge '{}': {} refused the API key: {} (check api_key_env / api_key_file; calls "
        "end as auth_error){}",
        settings_.name, endpoint_shown_, logText(why, 300), RateLimitedLog::note(suppressed));
  else
    spdlog::warn("llm judge '{}': call to {} failed: {}: {}{}", settings_.name, endpoint_shown_,
                 outcomeName(outcome), logText(why, 300), RateLimitedLog::note(suppressed));
}

void LlmJudge::finish(const std::shared_ptr<Call>& c, LlmVerdict verdict,
                      std::optional<TokenUsage> usage) const {
  LlmCallResult r;
  r.attempts = c->attempts;
  r.on_wire = c->on_wire;
  r.contexts_truncated = c->prompt.contexts_truncated;
  // Only a 2xx reply is billed by providers; it is charged with its reported usage, or with the
  // conservative estimate (prompt estimate + max_tokens) when it reports none.
  if (!c->answered) usage = TokenUsage{};
  if (!usage) usage = estimateUsage(c->prompt.estimated_tokens, settings_.max_tokens);
  r.usage = *usage;
  r.usage_reported = usage->reported;
  r.cost_usd = costUsd(c->batched ? batchPrice(settings_.price) : settings_.price, *usage);
  r.cost_eur = costEur(r.cost_usd, settings_.usd_to_eur);
  r.verdict = std::move(verdict);
  {
    std::lock_guard lock(mu_);
    reserved_->erase(*c);  // the settlement or release below is queued: it runs even at a stop
  }
  // The verdict goes on once the ledger has stored it and recorded its money (a billed
  // answer), or dropped the lease and freed the reservation of a call nobody answered (the next
  // delivery calls again).
  const bool billed = c->answered && (r.usage.prompt_tokens > 0 || r.usage.completion_tokens > 0);
  if (!billed) r.cost_usd = r.cost_eur = 0;
  const FinishRequest& end =
      billed ? endOf(c, r.cost_eur, serializeResult(r)) : endOf(c, std::nullopt, std::nullopt);
  c->result = std::move(r);
  ledger_.finish(end, [this, raw = Call::hold(c)](bool) {
    const auto call = Call::take(raw);
    settled(call, std::move(call->result));
  });
}

const FinishRequest& LlmJudge::endOf(const std::shared_ptr<Call>& c, std::optional<double> cost_eur,
                                     std::optional<std::string> verdict) const {
  FinishRequest& f = c->finish_request;  // assigned in place (the pooled call's buffers)
  f.scopes = c->scopes;
  f.day = c->day;
  f.reservation_id = c->reservation_id;
  f.event_id = c->store_key;
  f.judge = settings_.name;
  f.cost_eur = cost_eur;
  f.verdict = std::move(verdict);
  return f;
}

void LlmJudge::settled(const std::shared_ptr<Call>& c, LlmCallResult r) const {
  r.latency = std::chrono::duration_cast<Millis>(Steady::now() - c->started);
  std::shared_ptr<Call> next;
  if (!c->batched) {  // a batched call held no slot
    std::lock_guard lock(mu_);
    ++settles_;
    if (!waiting_.empty()) {
      next = waiting_.front();
      waiting_.pop_front();
    } else {
      --in_flight_;
    }
  }
  if (next) start(next);
  retryBudgetWaiting();  // this call's hold is gone: the first waiting reservation may fit now
  // Last: once done() has run the caller may destroy this judge (ThreadSanitizer caught a
  // test doing so while retryBudgetWaiting() still held mu_).
  deliver(c->done, c->verdict_done, std::move(r));
}

}  // namespace assay::llm
