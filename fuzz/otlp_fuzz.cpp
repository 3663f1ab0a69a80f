// libFuzzer target: one Kafka message value of an OTLP trace topic (sources/otlp_decode.hpp),
// read as protobuf and as OTLP/JSON, then through the span join with both built-in mappings
// (sources/trace_join.hpp), and expired. Nothing may crash or hang whatever the bytes; every
// view must stay inside the payload or the decoded document; the join must release every
// trace it took (its byte count back to 0 once everything has expired).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sources/otlp_decode.hpp"
#include "sources/trace_join.hpp"

namespace {

void join(const assay::otlp::Batch& b, const char* mapping) {
  assay::TraceJoinOptions o;
  o.mapping = *assay::builtinTraceMapping(mapping);
  o.max_traces = 64;
  assay::TraceJoin j(o);
  std::vector<assay::FinishedTrace> done;
  const auto t = assay::TraceJoin::Clock::now();
  j.add(
      b, {0, 0}, [](const std::string& id) { return id.back() != 'f'; }, done, t);
  j.expire(done, t + std::chrono::hours(1));
  if (j.traces() != 0 || j.bytes() != 0) __builtin_trap();
  for (const auto& f : done)
    if (f.event && f.event->id.size() != 32) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  assay::otlp::Batch b;
  std::string error;
  if (assay::otlp::decodeProto(payload, b, error)) {
    join(b, "openinference");
    join(b, "gen_ai");
  }
  if (assay::otlp::decodeJson(payload, b, error)) {
    join(b, "openinference");
    join(b, "gen_ai");
    std::string proto;
    if (!assay::otlp::jsonToProto(payload, proto, error)) __builtin_trap();
    assay::otlp::Batch again;
    if (!assay::otlp::decodeProto(proto, again, error)) __builtin_trap();  // our own encoding
    if (again.spans.size() != b.spans.size()) __builtin_trap();
  }
  return 0;
}
