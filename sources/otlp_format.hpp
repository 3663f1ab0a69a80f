#pragma once
/// The events topic read as OpenTelemetry traces (kafka.format otlp_json | otlp_proto): one
/// message decoded (sources/otlp_decode.hpp), its spans joined into RAG events
/// (sources/trace_join.hpp), and the join's series (docs/metrics.md):
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
/// Poll thread only, except release() (thread-safe).

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
#include "core/rate_limited_log.hpp"
#include "sources/event_parser.hpp"
#include "sources/format.hpp"
#include "sources/otlp_decode.hpp"
#include "sources/trace_join.hpp"

namespace assay {

/// The join's options from the configuration (mapping with its overrides, bounds).
TraceJoinOptions traceJoinOptions(const OtlpOptions& o);

/// The reason an OTLP message that `format`'s decoder refused with `error` is counted under
/// (docs/events.md, "Invalid messages"): too_deep, not_utf8 (a string field or JSON text that
/// is not UTF-8), not_json (otlp_json text that does not parse, or an escape of half a
/// surrogate pair), else wrong_type.
InvalidReason otlpInvalidReason(EventFormat format, std::string_view error);

/// kafka.format otlp_json | otlp_proto, a row of the format table (sources/format.hpp).
class OtlpFormat final : public InputFormat {
 public:
  OtlpFormat(const Config& config, prometheus::Registry& registry);

  /// Decodes and joins one message; finished traces (complete, incomplete, evicted) go to
  /// `out`, each already counted. A message feeding waiting traces is held in the join's
  /// message references (Read::held) before this returns.
  Read read(const Message& m, const Screen& screen, std::vector<DecodedEvent>& out) override;
  void expire(std::vector<DecodedEvent>& out) override;
  bool release(MessageRef m) override { return refs_.release(m); }
  void forget(const std::vector<std::int32_t>& partitions) override;
  std::size_t assembling() const override { return join_.traces(); }
  void refresh() override;
  std::string describe() const override;
  /// Keyed by the trace id when the line holds one trace, as the Collector's exporter keys by
  /// trace id with partition_traces_by_id; otlp_proto: the OTLP/JSON line re-encoded.
  bool encodeLine(const std::string& line, std::string& key, std::string& value,
                  std::string& error) const override;

 private:
  /// Counts the finished traces from `from` on and moves them to `out`.
  void finish(std::vector<DecodedEvent>& out);

  EventFormat format_;
  std::size_t max_bytes_;
  std::string mapping_, span_kind_;  // for the log line of a trace without any role
  std::string topic_;
  std::int64_t join_timeout_ms_;
  RateLimitedLog no_role_log_;
  TraceJoin join_;
  MessageRefs refs_;
  otlp::Batch batch_;                    // reused: its vectors keep their capacity
  std::vector<FinishedTrace> finished_;  // reused
  prometheus::Counter &kept_, &sampled_out_, &late_, &invalid_;
  prometheus::Counter &assembled_, &evicted_, &aged_out_, &split_;
  RateLimitedLog split_log_;
  prometheus::Family<prometheus::Counter>& incomplete_family_;
  // [missing: no_answer, no_question, no_retrieval][action: counted, judged]; null if impossible
  std::array<std::array<prometheus::Counter*, 2>, 3> incomplete_{};
  prometheus::Histogram& wait_;
  prometheus::Gauge &traces_, &bytes_;
};

std::unique_ptr<InputFormat> makeOtlpFormat(const Config& config, prometheus::Registry& registry);

}  // namespace assay
