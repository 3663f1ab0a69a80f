#pragma once
/// batch: true (docs/configuration.md, "Batch judging"): an LLM judge's calls through the
/// provider's batch API (OpenAI Batch API, Anthropic Message Batches) instead of one HTTP call
/// per event, at the batch price (pricing.hpp's kBatchPriceShare). A class of its own beside
/// LlmJudge, which owns it and hands it every reserved call (llm_batch.cpp says how batches are
/// recorded, submitted, polled, settled and taken over). Its state is guarded by the judge's
/// mutex; its timers run on the judge's HTTP client and do nothing once the judge is gone.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "judges/llm/llm_judge.hpp"

namespace assay::llm {

class LlmBatch {
 public:
  /// `judge` owns this and outlives it. Starts the periodic scan for batches another instance
  /// left (taken over once their lease lapses): at start and every batch_poll.
  explicit LlmBatch(const LlmJudge& judge);
  LlmBatch(const LlmBatch&) = delete;
  LlmBatch& operator=(const LlmBatch&) = delete;

  using Call = LlmJudge::Call;
  /// A reserved call joins the open batch; a full batch is submitted, else the first call arms
  /// the batch_max_wait timer.
  void enqueueBatch(const std::shared_ptr<Call>& call) const;
  /// The services stopped (LlmJudge::abandon): the open batch's calls are forgotten.
  void clearOpen() const { open_batch_.clear(); }

 private:
  struct Batch;
  void flushBatch() const;
  /// Extends each request's reservation and lease to the provider's window (a request the
  /// budget no longer admits is skipped_budget) and records the batch in the store, then
  /// sendBatch().
  void submitBatch(std::vector<std::shared_ptr<Call>> calls) const;
  /// Uploads the batch (OpenAI: its input file, recorded, then createBatch(); Anthropic: the
  /// message batch itself).
  void sendBatch(const std::shared_ptr<Batch>& batch) const;
  void createBatch(const std::shared_ptr<Batch>& batch) const;
  /// The provider accepted the batch as `id`: recorded, then polled.
  void registerBatch(const std::shared_ptr<Batch>& batch, const std::string& id) const;
  /// Writes the batch's record (renewing this instance's lease), then runs `next`; a lease
  /// another instance took meanwhile abandons the batch instead.
  void recordBatch(const std::shared_ptr<Batch>& batch, std::function<void()> next) const;
  /// The provider refused a step: counted as failed, every request released (provider_error).
  void refuseBatch(const std::shared_ptr<Batch>& batch, const char* what,
                   const HttpResponse& response) const;
  /// Releases every request (nothing was billed) with `outcome`, and drops the record.
  void abandonBatch(const std::shared_ptr<Batch>& batch, Outcome outcome,
                    const std::string& why) const;
  /// Polls a submitted batch every batch_poll until it ends, then settles its results.
  void pollBatch(const std::shared_ptr<Batch>& batch) const;
  void fetchResults(const std::shared_ptr<Batch>& batch, const std::string& url) const;
  void settleResults(const std::shared_ptr<Batch>& batch, const std::string& jsonl) const;
  /// Every batch_poll: the store's batches of this judge that nobody holds (their instance
  /// died) are taken over (recover()).
  void scanBatches() const;
  void recover(const std::string& key, const std::string& record) const;
  /// OpenAI: the batch made from the record's input file, among the listed batches (page after
  /// `after`); created now if there is none.
  void findBatch(const std::shared_ptr<Batch>& batch, const std::string& after) const;
  /// The batch's record in the store (JSON text, llm_batch.cpp).
  static std::string batchRecord(const Batch& batch);
  /// The lease (ms) held while a batch request is in flight: one poll lease plus its timeout.
  std::int64_t submitLeaseMs(Millis request_timeout) const;
  /// The provider's HTTP request to `path` (after the endpoint), with the judge's headers.
  HttpRequest batchRequest(const std::string& method, const std::string& path) const;

  const LlmJudge& judge_;
  // The open batch, the recorded ones this process submits or polls (by key).
  mutable std::vector<std::shared_ptr<Call>> open_batch_;
  mutable bool flush_armed_ = false;
  mutable std::map<std::string, std::shared_ptr<Batch>> batches_;
  mutable std::optional<LlmStats::Batch> batch_stats_;
  std::string batch_token_;  // this process's lease token on its batches
  std::vector<std::pair<std::string, std::string>> batch_headers_;  // auth and version headers
};

}  // namespace assay::llm
