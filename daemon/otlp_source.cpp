#include "daemon/otlp_source.hpp"

#include <prometheus/family.h>
#include <spdlog/spdlog.h>

namespace assay {

TraceJoinOptions traceJoinOptions(const OtlpOptions& o) {
  TraceJoinOptions j;
  j.mapping = builtinTraceMapping(o.mapping).value_or(TraceMapping{});  // the loader checked it
  for (const auto& [key, value] : o.attributes) overrideTraceMapping(j.mapping, key, value);
  j.timeout = std::chrono::milliseconds(o.join_timeout_ms);
  j.max_age = std::chrono::milliseconds(o.max_trace_age_ms);
  j.max_traces = o.max_traces;
  j.max_bytes = o.max_bytes;
  j.judge_incomplete = o.judge_incomplete;
  return j;
}

namespace {

prometheus::Family<prometheus::Counter>& spansFamily(prometheus::Registry& r) {
  return prometheus::BuildCounter()
      .Name("assay_otlp_spans_total")
      .Help(
          "OpenTelemetry spans read from the events topic, by outcome: kept (joined into a trace), "
          "sampled_out (the trace id's hash is above every sampling rate: never kept), late (of a "
          "trace already finished), invalid (no valid trace id)")
      .Register(r);
}

prometheus::Counter& counter(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Gauge& gauge(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

OtlpSource::OtlpSource(const Config& config, prometheus::Registry& registry)
    : format_(config.kafka.format),
      mapping_(config.otlp.mapping),
      span_kind_(traceJoinOptions(config.otlp).mapping.span_kind),
      join_(traceJoinOptions(config.otlp)),
      kept_(spansFamily(registry).Add({{"outcome", "kept"}})),
      sampled_out_(spansFamily(registry).Add({{"outcome", "sampled_out"}})),
      late_(spansFamily(registry).Add({{"outcome", "late"}})),
      invalid_(spansFamily(registry).Add({{"outcome", "invalid"}})),
      assembled_(counter(registry, "assay_otlp_traces_assembled_total",
                         "Traces that became an event with a retrieval and an LLM span")),
      evicted_(counter(registry, "assay_otlp_traces_evicted_total",
                       "Waiting traces dropped to stay under otlp.max_traces or otlp.max_bytes "
                       "(the oldest last span first); never judged")),
      aged_out_(counter(registry, "assay_otlp_traces_aged_out_total",
                        "Traces that reached otlp.max_trace_age_ms after their first span while "
                        "spans kept coming: they left as incomplete (judged with what they had, "
                        "or counted, as after a timeout), so that their offsets move on")),
      split_(counter(registry, "assay_otlp_traces_split_total",
                     "Traces whose spans came on two partitions (a Collector's Kafka exporter "
                     "without partition_traces_by_id): each part is joined apart, the answer "
                     "without its retrieval")),
      incomplete_family_(
          prometheus::BuildCounter()
              .Name("assay_otlp_traces_incomplete_total")
              .Help("Traces that waited otlp.join_timeout_ms after their last span without "
                    "every part, by what was missing (no_answer, no_question, "
                    "no_retrieval) and what was done (judged with what it had, or counted)")
              .Register(registry)),
      wait_(prometheus::BuildHistogram()
                .Name("assay_otlp_join_wait_seconds")
                .Help("Seconds from a trace's first span to its leaving the join (complete, "
                      "timed out or evicted)")
                .Register(registry)
                .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10,
                                                                 30, 60, 120, 300, 600})),
      traces_(gauge(registry, "assay_otlp_join_traces", "Traces waiting in the join now")),
      bytes_(
          gauge(registry, "assay_otlp_join_bytes",
                "Bytes of text held by the traces waiting in the join (otlp.max_bytes caps it)")) {
  static constexpr const char* kMissing[] = {"no_answer", "no_question", "no_retrieval"};
  for (std::size_t m = 0; m < 3; ++m) {
    incomplete_[m][0] = &incomplete_family_.Add({{"missing", kMissing[m]}, {"action", "counted"}});
    if (m == 2)  // only a trace without retrieval can be judged
      incomplete_[m][1] = &incomplete_family_.Add({{"missing", kMissing[m]}, {"action", "judged"}});
  }
}

InvalidReason otlpInvalidReason(EventFormat format, std::string_view error) {
  if (error.find("nested deeper") != std::string_view::npos) return InvalidReason::kTooDeep;
  if (error.rfind("not UTF-8", 0) == 0) return InvalidReason::kNotUtf8;
  if (format == EventFormat::kOtlpJson &&
      (error.rfind("not JSON", 0) == 0 || error.find("surrogate") != std::string_view::npos))
    return InvalidReason::kNotJson;
  return InvalidReason::kWrongType;
}

OtlpSource::Read OtlpSource::add(std::string_view payload, MessageRef at,
                                 const std::function<bool(const std::string&)>& keep,
                                 std::vector<FinishedTrace>& done) {
  Read r;
  std::string error;
  const bool decoded = format_ == EventFormat::kOtlpProto
                           ? otlp::decodeProto(payload, batch_, error)
                           : otlp::decodeJson(payload, batch_, error);
  if (!decoded) {
    r.ok = false;
    r.invalid = ParseOutcome{false, otlpInvalidReason(format_, error),
                             (format_ == EventFormat::kOtlpProto ? "not an OTLP protobuf request: "
                                                                 : "not an OTLP/JSON request: ") +
                                 error};
    return r;
  }
  invalid_.Increment(static_cast<double>(batch_.invalid_spans));
  const std::size_t from = done.size();
  const auto added = join_.add(batch_, at, keep, done);
  sampled_out_.Increment(static_cast<double>(added.sampled_out));
  late_.Increment(static_cast<double>(added.late));
  if (added.split > 0) {
    split_.Increment(static_cast<double>(added.split));
    long suppressed = 0;
    if (split_log_.allow(suppressed))
      spdlog::warn(
          "otlp: {} trace(s) of the message at partition {} offset {} have spans on another "
          "partition too: they are joined in parts, and an answer may be judged without its "
          "retrieval (no_context). The OpenTelemetry Collector's kafka exporter keeps a "
          "trace's spans on one partition with partition_traces_by_id: true{}",
          added.split, at.partition, at.offset, RateLimitedLog::note(suppressed));
  }
  kept_.Increment(static_cast<double>(added.spans - added.sampled_out - added.late));
  r.traces = added.traces;
  if (r.traces > 0) refs_.hold(at, r.traces);
  count(done, from);
  return r;
}

void OtlpSource::expire(std::vector<FinishedTrace>& done) {
  const std::size_t from = done.size();
  join_.expire(done);
  count(done, from);
}

void OtlpSource::forget(const std::vector<std::int32_t>& partitions) {
  join_.forget(partitions);
  refs_.forget(partitions);
}

void OtlpSource::refresh() {
  traces_.Set(static_cast<double>(join_.traces()));
  bytes_.Set(static_cast<double>(join_.bytes()));
}

void OtlpSource::count(const std::vector<FinishedTrace>& done, std::size_t from) {
  for (std::size_t i = from; i < done.size(); ++i) {
    const auto& f = done[i];
    wait_.Observe(f.wait_s);
    switch (f.how) {
      case FinishedTrace::How::kComplete:
        assembled_.Increment();
        break;
      case FinishedTrace::How::kEvicted:
        evicted_.Increment();
        break;
      case FinishedTrace::How::kIncomplete: {
        if (f.aged_out) aged_out_.Increment();
        long suppressed = 0;
        if (!f.any_role && no_role_log_.allow(suppressed))
          spdlog::warn(
              "otlp: trace {} timed out with no retrieval or LLM span under mapping {} (no span's "
              "'{}' names a role): counted {}; do the spans follow another convention "
              "(otlp.mapping, "
              "otlp.attributes)?{}",
              f.trace_id, mapping_, span_kind_, f.missing, RateLimitedLog::note(suppressed));
        const std::string_view missing = f.missing;
        const std::size_t m = missing == "no_answer" ? 0 : missing == "no_question" ? 1 : 2;
        if (auto* c = incomplete_[m][f.event ? 1 : 0]) c->Increment();
        break;
      }
    }
  }
}

}  // namespace assay
