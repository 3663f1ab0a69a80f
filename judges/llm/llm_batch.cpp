// batch: true LLM judges: the provider's batch API instead of one HTTP call per event
// (docs/configuration.md, "Batch judging").
//   OpenAI Batch API (https://platform.openai.com/docs/guides/batch): the requests as a JSONL
//   file uploaded with purpose "batch" (POST {endpoint}/files), a batch on
//   /v1/chat/completions with a 24 h window (POST {endpoint}/batches), polled
//   (GET {endpoint}/batches/{id}) until completed, then its output file
//   (GET {endpoint}/files/{output_file_id}/content): one line per request, by custom_id.
//   Anthropic Message Batches (https://docs.anthropic.com/en/api/creating-message-batches):
//   POST {endpoint}/v1/messages/batches {requests: [{custom_id, params}]}, polled until
//   processing_status "ended", then its results_url: one line per request, by custom_id.
// Every request is reserved in the ledger before it joins a batch (its worst case at the batch
// price) and settled from its own result; requests that fail or expire are released. Each
// batch's record (per request the event id, reservation id, day; then the uploaded file, then
// the provider's id, each written before the next request is sent) is kept in the budget store
// with a lease its poller renews, so that when the instance that submitted it dies at any step,
// another (or the same, restarted) takes it over: it settles the results of a batch the
// provider accepted (found by its input file when the instance died before it heard the id),
// creates one that was uploaded but not created, releases one that was not uploaded. The
// verdicts land in the verdict store, where the redelivered events find them; nothing is
// submitted or paid twice (one exception: Anthropic, a crash during the submission's own
// round trip, recover()).

#include "judges/llm/llm_batch.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <sstream>

#include "core/clock.hpp"
#include "core/json_limits.hpp"
#include "core/log_text.hpp"
#include "core/utf8.hpp"
#include "judges/llm/llm_call.hpp"

namespace assay::llm {

using Steady = std::chrono::steady_clock;

namespace {

std::string compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return {b.GetString(), b.GetSize()};
}

std::string stringMember(const rapidjson::Value& o, const char* key) {
  if (!o.IsObject()) return {};
  const auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsString()
             ? std::string(it->value.GetString(), it->value.GetStringLength())
             : std::string();
}

bool ok2xx(const HttpResponse& r) { return r.status >= 200 && r.status < 300; }

/// Parses `text` into `d` when it is within core/json_limits.hpp's bounds: a provider's reply
/// or a record from the store nested thousands deep would overflow RapidJSON's recursion.
/// False on a bound crossed or a syntax error.
bool parseBounded(rapidjson::Document& d, std::string_view text) {
  if (jsonShapeProblem(text)) return false;
  return !d.Parse(text.data(), text.size()).HasParseError();
}

// The "id" of what a 2xx reply created (a file, a batch); "" for any other reply.
std::string createdId(const HttpResponse& r) {
  if (!ok2xx(r)) return {};
  rapidjson::Document d;
  return parseBounded(d, r.body) ? stringMember(d, "id") : std::string();
}

std::string why(const HttpResponse& r) {
  return r.status == 0 ? r.error
                       : "HTTP " + std::to_string(r.status) + ": " + utf8Clean(r.body, 300);
}

// The leases: a batch's poller renews it every poll; another instance takes a batch over once
// it lapses (its poller died).
std::int64_t leaseMs(Millis poll) { return 3 * poll.count() + 10'000; }

LlmVerdict failed(Outcome o, std::string text) {
  LlmVerdict v;
  v.outcome = o;
  v.justification = std::move(text);
  return v;
}

}  // namespace

struct LlmBatch::Batch {
  std::string key;   // its record's name in the budget store (ours, before the provider's id)
  std::string id;    // the provider's ("" until the provider accepted the batch)
  std::string file;  // OpenAI: the uploaded input file ("" until uploaded)
  std::vector<std::shared_ptr<Call>> calls;
  std::map<std::string, std::shared_ptr<Call>> by_custom_id;
  std::int64_t submitted_ms = 0;  // epoch: when it left (or was taken to the provider)
  bool recovered = false;         // taken over from the store (no caller waits)
  double saved_eur = 0;
};

LlmBatch::LlmBatch(const LlmJudge& judge) : judge_(judge) {
  const auto& s = judge_.settings_;
  batch_stats_ = judge_.services_.stats().forBatch(s.name, s.version);
  batch_token_ = processNonce() + "/" + s.name;
  batch_headers_ = buildRequest(s.provider, s.endpoint, s.api_key, s.model, Prompt{}, s.max_tokens,
                                judge_.format_)
                       .headers;
  // Batches another instance left (it died before their results): taken over once their
  // lease lapses; looked for at start and every batch_poll.
  judge_.client_.schedule(Millis{1000}, ifAlive(judge_.alive_, [this] { scanBatches(); }));
}

std::string LlmBatch::batchRecord(const Batch& b) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  const auto str = [&w](const std::string& s) {
    w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("id");
  str(b.id);
  w.Key("file");
  str(b.file);
  w.Key("submitted_ms");
  w.Int64(b.submitted_ms);
  w.Key("requests");
  w.StartArray();
  for (const auto& c : b.calls) {
    w.StartArray();
    for (const std::string* s : {&c->custom_id, &c->store_key, &c->reservation_id, &c->day})
      str(*s);
    w.Int64(c->prompt.estimated_tokens);
    w.StartArray();  // its budget scopes, [name, cap], so that whoever takes it over settles them
    for (const auto& scope : c->scopes) {
      w.StartArray();
      str(scope.scope);
      w.Double(scope.daily_limit_eur);
      w.EndArray();
    }
    w.EndArray();
    w.EndArray();
  }
  w.EndArray();
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

HttpRequest LlmBatch::batchRequest(const std::string& method, const std::string& path) const {
  HttpRequest r;
  r.method = method;
  r.url = endpointUrl(judge_.settings_.endpoint, path);
  if (path.rfind("http", 0) == 0) {
    // A URL from the provider's reply (Anthropic's results_url): followed only on the
    // endpoint's own scheme, host and port, where the API key goes anyway; any other would be
    // sent the key (over plain http too). Elsewhere: an empty URL, which the client refuses.
    r.url = sameOrigin(path, judge_.settings_.endpoint) ? path : std::string();
  }
  for (const auto& h : batch_headers_)
    if (h.first != "content-type" && h.first != "Content-Type") r.headers.push_back(h);
  r.timeout = std::max(judge_.settings_.timeout, Millis{60'000});  // an upload of many requests
  return r;
}

std::int64_t LlmBatch::submitLeaseMs(Millis request_timeout) const {
  // Held across one batch request: another instance may take a batch that is being submitted
  // over only once that request has timed out (else both could create it).
  return leaseMs(judge_.settings_.batch_poll) + request_timeout.count();
}

void LlmBatch::enqueueBatch(const std::shared_ptr<Call>& c) const {
  std::vector<std::shared_ptr<Call>> full;
  bool arm = false;
  {
    std::lock_guard lock(judge_.mu_);
    open_batch_.push_back(c);
    if (open_batch_.size() >= judge_.settings_.batch_max_requests) {
      full.swap(open_batch_);
    } else if (!flush_armed_) {
      flush_armed_ = arm = true;
    }
  }
  if (!full.empty()) return submitBatch(std::move(full));
  if (arm)
    judge_.client_.schedule(judge_.settings_.batch_max_wait,
                            ifAlive(judge_.alive_, [this] { flushBatch(); }));
}

void LlmBatch::flushBatch() const {
  std::vector<std::shared_ptr<Call>> calls;
  {
    std::lock_guard lock(judge_.mu_);
    flush_armed_ = false;
    calls.swap(open_batch_);
  }
  if (!calls.empty()) submitBatch(std::move(calls));
}

void LlmBatch::submitBatch(std::vector<std::shared_ptr<Call>> calls) const {
  // While a request waits for its batch it holds a short reservation and lease (a crash then
  // frees them soon); the batch about to leave gets the provider's window: 24 h, plus an hour.
  // Its record goes into the store in the same step, before anything is sent: whatever
  // instance finds it after a crash settles or releases every request in it.
  constexpr std::int64_t kWindowMs = 25LL * 3'600'000;
  judge_.ledger_.run(ifAlive(judge_.alive_, [this,
                                             calls = std::move(calls)](BudgetStore& s) mutable {
    auto b = std::make_shared<Batch>();
    std::vector<std::shared_ptr<Call>> refused;
    for (auto& c : calls) {
      s.release(c->reservation_id, c->day, c->scopes);
      const auto r = s.reserve(c->scopes, c->reserved_eur, c->day, c->reservation_id,
                               kWindowMs + 50'000, /*close_on_refusal=*/true);
      if (r.status == ReserveStatus::kReserved &&
          s.claim(c->store_key, judge_.settings_.name, c->reservation_id, kWindowMs).status ==
              ClaimResult::Status::kClaimed)
        b->calls.push_back(c);
      else
        refused.push_back(c);
    }
    if (!b->calls.empty()) {
      b->key = "b" + processNonce() + "-" + std::to_string(judge_.sequence_++);
      b->submitted_ms = epochMs();
      for (std::size_t i = 0; i < b->calls.size(); ++i) {
        auto& c = b->calls[i];
        // Anthropic's custom_id: ^[a-zA-Z0-9_-]{1,64}$.
        c->custom_id = "r" + std::to_string(i) + "_" +
                       std::to_string(std::hash<std::string>{}(c->reservation_id) % 1'000'000'007);
        b->by_custom_id[c->custom_id] = c;
      }
      {
        std::lock_guard lock(judge_.mu_);
        batches_[b->key] = b;  // ours: the scan for batches to take over leaves it be
      }
      if (s.saveBatch(judge_.settings_.name, b->key, batchRecord(*b)) &&
          s.leaseBatch(judge_.settings_.name, b->key, batch_token_,
                       submitLeaseMs(batchRequest("POST", "").timeout)))
        for (auto& c : b->calls) c->submitted = true;  // the record answers for it now
      else
        spdlog::warn(
            "llm judge '{}': batch of {} request(s) is not recorded in the budget store (it did "
            "not answer): if this instance dies before its results, nobody fetches them",
            judge_.settings_.name, b->calls.size());
    }
    judge_.client_.schedule(
        Millis{0}, ifAlive(judge_.alive_, [this, b, refused = std::move(refused)] {
          for (const auto& c : refused)
            judge_.finish(
                c,
                failed(Outcome::kSkippedBudget, "the budget no longer admits this batch request"),
                std::nullopt);
          if (!b->calls.empty()) sendBatch(b);
        }));
  }));
}

void LlmBatch::abandonBatch(const std::shared_ptr<Batch>& b, Outcome outcome,
                            const std::string& why) const {
  // Nothing of it was billed: every request is released (its event is judged again when it
  // is delivered again), and its record dropped.
  for (auto& c : b->calls) judge_.finish(c, failed(outcome, why), std::nullopt);
  judge_.ledger_.run(ifAlive(judge_.alive_, [this, key = b->key](BudgetStore& s) {
    s.removeBatch(judge_.settings_.name, key);
  }));
  std::lock_guard lock(judge_.mu_);
  batches_.erase(b->key);
}

void LlmBatch::refuseBatch(const std::shared_ptr<Batch>& b, const char* what,
                           const HttpResponse& r) const {
  batch_stats_->failed->Increment();
  spdlog::warn("llm judge '{}': {} of {} request(s) refused: {}", judge_.settings_.name, what,
               b->calls.size(), logText(why(r), 300));
  abandonBatch(b, Outcome::kProviderError, std::string(what) + " refused: " + why(r));
}

void LlmBatch::recordBatch(const std::shared_ptr<Batch>& b, std::function<void()> next) const {
  // The record's new state goes to the store before the next step is sent; a lease taken over
  // meanwhile (this instance seemed dead) leaves the batch to the instance that holds it.
  judge_.ledger_.run(ifAlive(judge_.alive_, [this, b, record = batchRecord(*b),
                                             next = std::move(next)](BudgetStore& s) mutable {
    if (!s.leaseBatch(judge_.settings_.name, b->key, batch_token_,
                      submitLeaseMs(judge_.settings_.timeout))) {
      spdlog::warn(
          "llm judge '{}': batch of {} request(s) was taken over by another instance before it "
          "was submitted; its requests are left to it",
          judge_.settings_.name, b->calls.size());
      judge_.client_.schedule(Millis{0}, ifAlive(judge_.alive_, [this, b] {
                                abandonBatch(b, Outcome::kProviderError,
                                             "the batch was taken over by another instance");
                              }));
      return;
    }
    if (!s.saveBatch(judge_.settings_.name, b->key, record))
      spdlog::warn(
          "llm judge '{}': batch {} is not recorded in the budget store (it did not answer): "
          "if this instance dies before its results, nobody fetches them",
          judge_.settings_.name, b->key);
    judge_.client_.schedule(Millis{0}, ifAlive(judge_.alive_, std::move(next)));
  }));
}

void LlmBatch::sendBatch(const std::shared_ptr<Batch>& b) const {
  if (judge_.settings_.provider == Provider::kAnthropic) {
    std::string body = R"({"requests":[)";
    for (std::size_t i = 0; i < b->calls.size(); ++i)
      body += std::string(i ? "," : "") + R"({"custom_id":")" + b->calls[i]->custom_id +
              R"(","params":)" + b->calls[i]->request.body + "}";
    body += "]}";
    auto req = batchRequest("POST", "/v1/messages/batches");
    req.headers.emplace_back("content-type", "application/json");
    req.body = std::move(body);
    judge_.client_.submit(std::move(req), ifAlive(judge_.alive_, [this, b](const HttpResponse& r) {
                            const std::string id = createdId(r);
                            if (id.empty()) return refuseBatch(b, "batch", r);
                            registerBatch(b, id);
                          }));
    return;
  }
  std::string jsonl;
  for (const auto& c : b->calls)
    jsonl += R"({"custom_id":")" + c->custom_id +
             R"(","method":"POST","url":"/v1/chat/completions","body":)" + c->request.body + "}\n";
  const std::string boundary = "assay-batch-" + processNonce();
  std::string body = "--" + boundary +
                     "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--" +
                     boundary +
                     "\r\nContent-Disposition: form-data; name=\"file\"; "
                     "filename=\"assay-batch.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
                     jsonl + "\r\n--" + boundary + "--\r\n";
  auto req = batchRequest("POST", "/files");
  req.headers.emplace_back("content-type", "multipart/form-data; boundary=" + boundary);
  req.body = std::move(body);
  judge_.client_.submit(std::move(req), ifAlive(judge_.alive_, [this, b](const HttpResponse& r) {
                          const std::string file = createdId(r);
                          if (file.empty()) return refuseBatch(b, "batch file", r);
                          // An uploaded file costs nothing; the batch made from it is what is paid.
                          b->file = file;
                          recordBatch(b, [this, b] { createBatch(b); });
                        }));
}

void LlmBatch::createBatch(const std::shared_ptr<Batch>& b) const {
  auto req = batchRequest("POST", "/batches");
  req.timeout = judge_.settings_.timeout;  // a small request (recordBatch's lease covers it)
  req.headers.emplace_back("content-type", "application/json");
  req.body = R"({"input_file_id":")" + b->file +
             R"(","endpoint":"/v1/chat/completions","completion_window":"24h"})";
  judge_.client_.submit(std::move(req), ifAlive(judge_.alive_, [this, b](const HttpResponse& r) {
                          const std::string id = createdId(r);
                          if (id.empty()) return refuseBatch(b, "batch", r);
                          registerBatch(b, id);
                        }));
}

void LlmBatch::registerBatch(const std::shared_ptr<Batch>& b, const std::string& id) const {
  b->id = id;
  judge_.ledger_.run(ifAlive(judge_.alive_, [this, b, record = batchRecord(*b)](BudgetStore& s) {
    if (!s.saveBatch(judge_.settings_.name, b->key, record) ||
        !s.leaseBatch(judge_.settings_.name, b->key, batch_token_,
                      leaseMs(judge_.settings_.batch_poll)))
      spdlog::warn(
          "llm judge '{}': batch {} is not recorded in the budget store (it did not answer): "
          "if this instance dies before its results, nobody fetches them",
          judge_.settings_.name, b->id);
  }));
  if (!b->recovered) {
    batch_stats_->submitted->Increment();
    batch_stats_->requests->Observe(static_cast<double>(b->calls.size()));
  }
  spdlog::info("llm judge '{}': batch {} {} ({} request(s))", judge_.settings_.name, id,
               b->recovered ? "taken over" : "submitted", b->calls.size());
  judge_.client_.schedule(judge_.settings_.batch_poll,
                          ifAlive(judge_.alive_, [this, b] { pollBatch(b); }));
}

void LlmBatch::pollBatch(const std::shared_ptr<Batch>& b) const {
  judge_.ledger_.run(ifAlive(judge_.alive_, [this, key = b->key](BudgetStore& s) {
    s.leaseBatch(judge_.settings_.name, key, batch_token_, leaseMs(judge_.settings_.batch_poll));
  }));
  const bool anthropic = judge_.settings_.provider == Provider::kAnthropic;
  auto req = batchRequest("GET", anthropic ? "/v1/messages/batches/" + b->id : "/batches/" + b->id);
  judge_.client_.submit(
      std::move(req), ifAlive(judge_.alive_, [this, b, anthropic](const HttpResponse& r) {
        rapidjson::Document d;
        if (!ok2xx(r) || !parseBounded(d, r.body) || !d.IsObject()) {
          long suppressed = 0;
          if (judge_.failure_log_.allow(suppressed))
            spdlog::warn("llm judge '{}': batch {} status: {}; asked again in {} s{}",
                         judge_.settings_.name, b->id, logText(why(r), 300),
                         judge_.settings_.batch_poll.count() / 1000,
                         RateLimitedLog::note(suppressed));
          judge_.client_.schedule(judge_.settings_.batch_poll,
                                  ifAlive(judge_.alive_, [this, b] { pollBatch(b); }));
          return;
        }
        if (anthropic) {
          if (stringMember(d, "processing_status") == "ended")
            return fetchResults(b, stringMember(d, "results_url"));
        } else {
          const std::string status = stringMember(d, "status");
          const std::string out = stringMember(d, "output_file_id");
          if (status == "completed" ||
              ((status == "expired" || status == "failed" || status == "cancelled") &&
               !out.empty()))
            return fetchResults(b, "/files/" + out + "/content");
          if (status == "expired" || status == "failed" || status == "cancelled")
            return settleResults(b, "");  // nothing answered: every request released
        }
        judge_.client_.schedule(judge_.settings_.batch_poll,
                                ifAlive(judge_.alive_, [this, b] { pollBatch(b); }));
      }));
}

void LlmBatch::fetchResults(const std::shared_ptr<Batch>& b, const std::string& url) const {
  judge_.client_.submit(
      batchRequest("GET", url), ifAlive(judge_.alive_, [this, b](const HttpResponse& r) {
        if (!ok2xx(r)) {
          spdlog::warn("llm judge '{}': batch {} results: {}; asked again in {} s",
                       judge_.settings_.name, b->id, logText(why(r), 300),
                       judge_.settings_.batch_poll.count() / 1000);
          judge_.client_.schedule(judge_.settings_.batch_poll,
                                  ifAlive(judge_.alive_, [this, b] { pollBatch(b); }));
          return;
        }
        settleResults(b, r.body);
      }));
}

void LlmBatch::settleResults(const std::shared_ptr<Batch>& b, const std::string& jsonl) const {
  const bool anthropic = judge_.settings_.provider == Provider::kAnthropic;
  std::istringstream lines(jsonl);
  std::size_t answered = 0;
  for (std::string line; std::getline(lines, line);) {
    rapidjson::Document d;
    if (!parseBounded(d, line) || !d.IsObject()) continue;
    const auto it = b->by_custom_id.find(stringMember(d, "custom_id"));
    if (it == b->by_custom_id.end()) continue;
    auto c = it->second;
    b->by_custom_id.erase(it);
    int status = 0;
    std::string body, failure;
    if (anthropic) {
      const auto& result = d["result"];
      const std::string type = stringMember(result, "type");
      if (type == "succeeded" && result.HasMember("message")) {
        status = 200;
        body = compact(result["message"]);
      } else if (type == "errored" && result.HasMember("error")) {
        status = 400;
        body = compact(result["error"]);
      } else {
        failure = "batch request " + type;
      }
    } else if (d.HasMember("response") && d["response"].IsObject() &&
               d["response"].HasMember("body")) {
      status = d["response"].HasMember("status_code") && d["response"]["status_code"].IsInt()
                   ? d["response"]["status_code"].GetInt()
                   : 0;
      body = compact(d["response"]["body"]);
    } else {
      failure = d.HasMember("error") && d["error"].IsObject()
                    ? "batch request failed: " + stringMember(d["error"], "code") + " " +
                          stringMember(d["error"], "message")
                    : "batch request without a response";
    }
    if (!failure.empty()) {
      judge_.finish(c, failed(Outcome::kTimeout, failure), std::nullopt);
      continue;
    }
    const auto reply = parseReply(judge_.settings_.provider, status, body);
    if (reply.ok) {
      c->answered = true;
      ++answered;
      auto v = parseVerdict(reply.content, reply.finish, judge_.settings_.rubric.minScore(),
                            judge_.settings_.rubric.maxScore());
      judge_.flagTrimmed(c->prompt, v);
      const auto usage =
          reply.usage ? *reply.usage
                      : estimateUsage(c->prompt.estimated_tokens, judge_.settings_.max_tokens);
      b->saved_eur +=
          costEur(costUsd(judge_.settings_.price, usage), judge_.settings_.usd_to_eur) -
          costEur(costUsd(batchPrice(judge_.settings_.price), usage), judge_.settings_.usd_to_eur);
      judge_.finish(c, std::move(v), reply.usage ? reply.usage : std::optional<TokenUsage>{});
      continue;
    }
    const bool billed =
        reply.usage && (reply.usage->prompt_tokens > 0 || reply.usage->completion_tokens > 0);
    c->answered = billed;
    judge_.finish(c,
                  failed(Outcome::kProviderError,
                         "HTTP " + std::to_string(status) + " " + reply.error_type + ": " +
                             redactSecrets(reply.error_message, judge_.settings_.api_key,
                                           judge_.settings_.endpoint)),
                  billed ? reply.usage : std::optional<TokenUsage>{TokenUsage{}});
  }
  // Requests the results do not mention: expired in the provider's window.
  for (auto& [id, c] : b->by_custom_id)
    judge_.finish(c, failed(Outcome::kTimeout, "the batch ended without this request (expired)"),
                  std::nullopt);
  const bool expired = answered == 0 && !b->calls.empty();
  (expired ? batch_stats_->expired : batch_stats_->completed)->Increment();
  batch_stats_->latency->Observe(static_cast<double>(epochMs() - b->submitted_ms) / 1000.0);
  batch_stats_->saved->Increment(b->saved_eur);
  spdlog::info("llm judge '{}': batch {} ended: {} of {} request(s) answered{}",
               judge_.settings_.name, b->id, answered, b->calls.size(),
               b->recovered ? " (taken over from the store)" : "");
  judge_.ledger_.run(ifAlive(judge_.alive_, [this, key = b->key](BudgetStore& s) {
    s.removeBatch(judge_.settings_.name, key);
  }));
  std::lock_guard lock(judge_.mu_);
  batches_.erase(b->key);
}

void LlmBatch::scanBatches() const {
  judge_.ledger_.run(ifAlive(judge_.alive_, [this](BudgetStore& s) {
    const auto records = s.batchRecords(judge_.settings_.name);
    if (!records) return;
    for (const auto& [key, record] : *records) {
      {
        std::lock_guard lock(judge_.mu_);
        if (batches_.count(key)) continue;  // ours, being submitted or polled
      }
      // Held long enough for the listing or the creation recover() may send.
      if (!s.leaseBatch(judge_.settings_.name, key, batch_token_,
                        submitLeaseMs(judge_.settings_.timeout)))
        continue;  // another instance holds it
      judge_.client_.schedule(Millis{0}, ifAlive(judge_.alive_, [this, key = key, record = record] {
                                recover(key, record);
                              }));
    }
  }));
  judge_.client_.schedule(judge_.settings_.batch_poll,
                          ifAlive(judge_.alive_, [this] { scanBatches(); }));
}

void LlmBatch::recover(const std::string& key, const std::string& record) const {
  rapidjson::Document d;
  if (!parseBounded(d, record) || !d.IsObject() || !d.HasMember("requests") ||
      !d["requests"].IsArray()) {
    spdlog::error("llm judge '{}': batch {}: unreadable record in the store; dropped",
                  judge_.settings_.name, key);
    judge_.ledger_.run(ifAlive(
        judge_.alive_, [this, key](BudgetStore& s) { s.removeBatch(judge_.settings_.name, key); }));
    return;
  }
  auto b = std::make_shared<Batch>();
  b->key = key;
  // A record without "id" was written before records were kept from the start: its key is the
  // provider's id.
  b->id = d.HasMember("id") ? stringMember(d, "id") : key;
  b->file = stringMember(d, "file");
  b->recovered = true;
  b->submitted_ms =
      d.HasMember("submitted_ms") && d["submitted_ms"].IsInt64() && d["submitted_ms"].GetInt64() > 0
          ? d["submitted_ms"].GetInt64()
          : epochMs();
  for (const auto& r : d["requests"].GetArray()) {
    if (!r.IsArray() || r.Size() < 5 || r.Size() > 6 || !r[0].IsString() || !r[1].IsString() ||
        !r[2].IsString() || !r[3].IsString() || !r[4].IsInt64())
      continue;
    auto c = newCall();
    c->custom_id = r[0].GetString();
    // The verdict store's key (a record written before keys were hashed: the event id, whose
    // verdict the redelivered event then does not find: judged once more)
    c->store_key = r[1].GetString();
    c->reservation_id = r[2].GetString();
    c->day = r[3].GetString();
    c->prompt.estimated_tokens = r[4].GetInt64();
    // The scopes its reservation was made in; a record written before they were kept: the
    // global and the judge's (a tenant's or app's reservation then expires unsettled).
    if (r.Size() == 6 && r[5].IsArray())
      for (const auto& scope : r[5].GetArray())
        if (scope.IsArray() && scope.Size() == 2 && scope[0].IsString() && scope[1].IsNumber())
          c->scopes.push_back({std::string(scope[0].GetString(), scope[0].GetStringLength()),
                               scope[1].GetDouble()});
    if (c->scopes.empty()) c->scopes = judge_.baseScopes();
    c->batched = c->submitted = true;
    c->done = [](const LlmCallResult&) {
    };  // its event, redelivered, finds the verdict in the store
    b->calls.push_back(c);
    b->by_custom_id[c->custom_id] = c;
  }
  {
    std::lock_guard lock(judge_.mu_);
    if (batches_.count(key)) return;
    batches_[key] = b;
  }
  if (!b->id.empty()) {
    spdlog::info(
        "llm judge '{}': batch {} ({} request(s)) taken over: its instance stopped before "
        "its results",
        judge_.settings_.name, b->id, b->calls.size());
    return pollBatch(b);
  }
  if (!b->file.empty()) return findBatch(b, "");
  // Stopped before the provider answered the submission. OpenAI: before the upload finished,
  // so no batch exists. Anthropic: the batch may exist, but it cannot be found again (a
  // message batch carries nothing of ours until it ends).
  if (judge_.settings_.provider == Provider::kAnthropic)
    spdlog::warn(
        "llm judge '{}': a batch of {} request(s) was being submitted when its instance "
        "stopped; they are released and judged again on redelivery (if the provider created "
        "that batch, it is paid twice)",
        judge_.settings_.name, b->calls.size());
  else
    spdlog::info(
        "llm judge '{}': a batch of {} request(s) was being uploaded when its instance "
        "stopped; no batch was created: they are released and judged again on redelivery",
        judge_.settings_.name, b->calls.size());
  abandonBatch(b, Outcome::kProviderError, "its instance stopped before the batch was submitted");
}

void LlmBatch::findBatch(const std::shared_ptr<Batch>& b, const std::string& after) const {
  // OpenAI: the input file was uploaded, the batch maybe created from it: the batches are
  // listed (newest first, https://platform.openai.com/docs/api-reference/batch/list) back to
  // an hour before the record was written; the one made from our file is taken over, else it
  // is created now. Nothing is created twice.
  constexpr std::int64_t kSlackS = 3600;
  judge_.ledger_.run(ifAlive(judge_.alive_, [this, key = b->key](BudgetStore& s) {
    s.leaseBatch(judge_.settings_.name, key, batch_token_, submitLeaseMs(judge_.settings_.timeout));
  }));
  auto req = batchRequest("GET", "/batches?limit=100" + (after.empty() ? "" : "&after=" + after));
  req.timeout = judge_.settings_.timeout;
  judge_.client_.submit(
      std::move(req), ifAlive(judge_.alive_, [this, b](const HttpResponse& r) {
        rapidjson::Document d;
        if (!ok2xx(r) || !parseBounded(d, r.body) || !d.IsObject() || !d.HasMember("data") ||
            !d["data"].IsArray()) {
          spdlog::warn(
              "llm judge '{}': listing the batches to find the one of file {}: {}; asked "
              "again in {} s",
              judge_.settings_.name, b->file, logText(why(r), 300),
              judge_.settings_.batch_poll.count() / 1000);
          judge_.client_.schedule(judge_.settings_.batch_poll,
                                  ifAlive(judge_.alive_, [this, b] { findBatch(b, ""); }));
          return;
        }
        std::string last;
        bool older = false;
        for (const auto& x : d["data"].GetArray()) {
          if (stringMember(x, "input_file_id") == b->file && !stringMember(x, "id").empty()) {
            spdlog::info("llm judge '{}': batch {} found at the provider by its input file {}",
                         judge_.settings_.name, stringMember(x, "id"), b->file);
            return registerBatch(b, stringMember(x, "id"));
          }
          last = stringMember(x, "id");
          if (x.IsObject() && x.HasMember("created_at") && x["created_at"].IsInt64() &&
              x["created_at"].GetInt64() < b->submitted_ms / 1000 - kSlackS)
            older = true;
        }
        const bool more = d.HasMember("has_more") && d["has_more"].IsBool() &&
                          d["has_more"].GetBool() && !last.empty() && !older;
        if (more) return findBatch(b, last);
        spdlog::info(
            "llm judge '{}': the batch of file {} ({} request(s)) was not created "
            "before its instance stopped: created now",
            judge_.settings_.name, b->file, b->calls.size());
        createBatch(b);
      }));
}

}  // namespace assay::llm
