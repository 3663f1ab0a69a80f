#pragma once
/// The shared resources of the asynchronous judges (cost class kRemoteCall: the LLM judges):
/// HTTP clients, each on its own thread; the budget ledger on its own thread (judges/llm/
/// ledger.hpp); the price table; the LLM and budget series. Built by the pipeline before any
/// judge, given to the factories through `JudgeContext::services`, stopped once the workers
/// are joined, destroyed after the judges. Nothing starts (no thread, no connection, no series)
/// until a judge asks for it, so a configuration without such judges costs nothing.

#include <memory>

#include "judges/budget_options.hpp"

namespace prometheus {
class Registry;
}

namespace assay {
namespace llm {
class CallServices;
}

class JudgeServices {
 public:
  /// `budget` and `registry` must outlive the services.
  JudgeServices(const BudgetOptions& budget, prometheus::Registry& registry);
  ~JudgeServices();  ///< stop()
  JudgeServices(const JudgeServices&) = delete;
  JudgeServices& operator=(const JudgeServices&) = delete;

  /// Whether the budget store answered its last request (for /readyz); true when no judge
  /// uses it. Never blocks.
  bool ready() const;
  /// Asynchronous judgements started and not yet answered, over every judge.
  int pending() const;
  /// Asks for the budget gauges to be refreshed (and budget alerts logged) by the ledger's
  /// thread. Never blocks; called about once a second by the poll thread.
  void refresh();
  /// Stops the HTTP threads (calls still running are abandoned: their callbacks never run, so
  /// their events stay unfinished), then the ledger (its queued settlements are recorded first;
  /// queued reservations are dropped), then releases the reservations of the abandoned calls
  /// and removes their (event, judge) marks, so that their redelivered events are judged again
  /// after a restart. Call it once no worker can start a judgement any more, and before the
  /// judges and whatever their callbacks reach are destroyed. Idempotent.
  void stop();

  /// The LLM judges' side (judges/llm/call_services.hpp).
  llm::CallServices& calls() { return *calls_; }

 private:
  std::unique_ptr<llm::CallServices> calls_;
};

}  // namespace assay
