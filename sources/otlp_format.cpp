#include "sources/otlp_format.hpp"

#include <fmt/format.h>
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

OtlpFormat::OtlpFormat(const Config& config, prometheus::Registry& registry)
    : format_(config.kafka.format),
      max_bytes_(config.limits.max_event_bytes),
      mapping_(config.otlp.mapping),
      span_kind_(traceJoinOptions(config.otlp).mapping.span_kind),
      topic_(config.kafka.topic),
      join_timeout_ms_(config.otlp.join_timeout_ms),
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

OtlpFormat::Read OtlpFormat::read(const Message& m, const Screen& screen,
                                  std::vector<DecodedEvent>& out) {
  Read r;
  if (m.payload.size() > max_bytes_) {
    r.ok = false;
    r.invalid = ParseOutcome{
        false, InvalidReason::kTooLarge,
        fmt::format("{} bytes, limits.max_event_bytes is {}", m.payload.size(), max_bytes_)};
    return r;
  }
  std::string error;
  const bool decoded = format_ == EventFormat::kOtlpProto
                           ? otlp::decodeProto(m.payload, batch_, error)
                           : otlp::decodeJson(m.payload, batch_, error);
  if (!decoded) {
    r.ok = false;
    r.invalid = ParseOutcome{false, otlpInvalidReason(format_, error),
                             (format_ == EventFormat::kOtlpProto ? "not an OTLP protobuf request: "
                                                                 : "not an OTLP/JSON request: ") +
                                 error};
    return r;
  }
  invalid_.Increment(static_cast<double>(batch_.invalid_spans));
  const auto added = join_.add(
      batch_, m.at, [&screen](const std::string& id) { return !screen(id).rejected; }, finished_);
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
          added.split, m.at.partition, m.at.offset, RateLimitedLog::note(suppressed));
  }
  kept_.Increment(static_cast<double>(added.spans - added.sampled_out - added.late));
  r.held = added.traces > 0;
  if (r.held) refs_.hold(m.at, added.traces);
  finish(out);
  return r;
}

void OtlpFormat::expire(std::vector<DecodedEvent>& out) {
  join_.expire(finished_);
  finish(out);
}

void OtlpFormat::forget(const std::vector<std::int32_t>& partitions) {
  join_.forget(partitions);
  refs_.forget(partitions);
}

void OtlpFormat::refresh() {
  traces_.Set(static_cast<double>(join_.traces()));
  bytes_.Set(static_cast<double>(join_.bytes()));
}

std::string OtlpFormat::describe() const {
  return fmt::format(
      "kafka: {} reads OpenTelemetry traces ({}), mapping {}; a trace waits up to {} ms after "
      "its last span",
      topic_, format_ == EventFormat::kOtlpJson ? "otlp_json" : "otlp_proto", mapping_,
      join_timeout_ms_);
}

bool OtlpFormat::encodeLine(const std::string& line, std::string& key, std::string& value,
                            std::string& error) const {
  otlp::Batch b;
  std::string ignored;
  if (otlp::decodeJson(line, b, ignored) && !b.spans.empty()) {
    bool one = true;
    for (const auto& s : b.spans) one = one && s.trace_id == b.spans[0].trace_id;
    if (one) key = otlp::hex(b.spans[0].trace_id.data(), 16);
  }
  if (format_ == EventFormat::kOtlpProto) return otlp::jsonToProto(line, value, error);
  value = line;
  return true;
}

void OtlpFormat::finish(std::vector<DecodedEvent>& out) {
  for (auto& f : finished_) {
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
    out.push_back({std::move(f.event), std::nullopt, std::move(f.messages)});
  }
  finished_.clear();
}

std::unique_ptr<InputFormat> makeOtlpFormat(const Config& config, prometheus::Registry& registry) {
  return std::make_unique<OtlpFormat>(config, registry);
}

}  // namespace assay
