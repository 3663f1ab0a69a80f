#pragma once
/// The events topic read as OpenTelemetry traces (kafka.format otlp_json | otlp_proto): one
/// message decoded (daemon/otlp_decode.hpp), its spans joined into RAG events
/// (daemon/trace_join.hpp), and the join's series (docs/metrics.md):
///   assay_otlp_spans_total{outcome}          spans read: kept, sampled_out (the trace id's
///                                            hash is above every rate: never kept), late (of
///                                            a trace already finished), invalid (no valid
///                                            trace id)
///   assay_otlp_traces_assembled_total        traces that became an event with every part
///   assay_otlp_traces_incomplete_total{missing, action}
///                                            traces that timed out without a part
///                                            (missing: no_answer, no_question, no_retrieval;
///                                            action: judged, counted)
///   assay_otlp_traces_evicted_total          traces dropped to stay under max_traces /
///                                            max_bytes
///   assay_otlp_join_wait_seconds             histogram: first span → the trace leaves the join
///   assay_otlp_join_traces                   traces waiting now
///   assay_otlp_join_bytes                    text they hold, bytes
/// Poll thread only, except refs() (thread-safe).

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/options.hpp"
#include "daemon/event_parser.hpp"
#include "daemon/otlp_decode.hpp"
#include "daemon/trace_join.hpp"
#include "judges/rate_limited_log.hpp"

namespace assay {

/// The join's options from the configuration (mapping with its overrides, bounds).
TraceJoinOptions traceJoinOptions(const OtlpOptions& o);

/// The reason an OTLP message that `format`'s decoder refused with `error` is counted under
/// (docs/events.md, "Invalid messages"): too_deep, not_utf8 (a string field or JSON text that
/// is not UTF-8), not_json (otlp_json text that does not parse, or an escape of half a
/// surrogate pair), else wrong_type.
InvalidReason otlpInvalidReason(EventFormat format, std::string_view error);

class OtlpSource {
 public:
  OtlpSource(const Config& config, prometheus::Registry& registry);

  struct Read {
    bool ok = true;
    ParseOutcome invalid;    ///< when !ok: why the message is not an OTLP request
    std::size_t traces = 0;  ///< waiting traces it feeds; 0 = finished now
  };
  /// Decodes and joins one message. Finished traces (complete, incomplete, evicted) are
  /// appended to `done`, each already counted. When Read::traces > 0, the message is held in
  /// refs() for that many traces before this returns, so handle `done` after.
  Read add(std::string_view payload, MessageRef at,
           const std::function<bool(const std::string&)>& keep, std::vector<FinishedTrace>& done);
  /// Traces past the join timeout (poll loop, every turn).
  void expire(std::vector<FinishedTrace>& done);
  void forget(const std::vector<std::int32_t>& partitions);
  /// Updates the join gauges (once a second).
  void refresh();

  MessageRefs& refs() { return refs_; }
  const TraceJoin& join() const { return join_; }

 private:
  void count(const std::vector<FinishedTrace>& done, std::size_t from);

  EventFormat format_;
  std::string mapping_, span_kind_;  // for the log line of a trace without any role
  RateLimitedLog no_role_log_;
  TraceJoin join_;
  MessageRefs refs_;
  otlp::Batch batch_;  // reused: its vectors keep their capacity
  prometheus::Counter &kept_, &sampled_out_, &late_, &invalid_;
  prometheus::Counter &assembled_, &evicted_, &aged_out_, &split_;
  RateLimitedLog split_log_;
  prometheus::Family<prometheus::Counter>& incomplete_family_;
  // [missing: no_answer, no_question, no_retrieval][action: counted, judged]; null if impossible
  std::array<std::array<prometheus::Counter*, 2>, 3> incomplete_{};
  prometheus::Histogram& wait_;
  prometheus::Gauge &traces_, &bytes_;
};

}  // namespace assay
