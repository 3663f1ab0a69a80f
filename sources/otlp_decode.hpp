#pragma once
/// OTLP trace payloads, decoded: one Kafka message from the OpenTelemetry Collector's Kafka
/// exporter holds one `ExportTraceServiceRequest` (resource spans → scope spans → spans, each
/// with key/value attributes), in one of its two encodings:
///  - `otlp_proto`, the exporter's default: protobuf, decoded here by a small reader of the
///    wire format (varints, fixed64/fixed32, length-delimited fields; unknown fields skipped)
///    for the fields assay reads, with the field numbers of opentelemetry-proto v1
///    (trace/v1/trace.proto, common/v1/common.proto, resource/v1/resource.proto; the same
///    numbers are written out in tests/data/otlp/otlp_trace.proto, which protoc encodes for the
///    tests);
///  - `otlp_json`: the OTLP/JSON mapping
///  (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding):
///    lowerCamelCase keys, trace and span ids as hexadecimal strings (not base64), enums as
///    integers, 64-bit integers as decimal strings or numbers, unknown keys ignored.
/// Both give the same `Batch`. Bounds: the payload is limited by limits.max_event_bytes before
/// it gets here; AnyValue nesting (arrays and key/value lists inside attributes) deeper than
/// kMaxValueDepth, protobuf groups, truncated fields and JSON that is not an object are
/// errors (the message is invalid: counted, copied to the dead-letter topic). A span whose
/// trace id is not 16 bytes (32 hex digits), or all zeros, is skipped and counted, not an
/// error. Never throws on payload content.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace assay::otlp {

/// Arrays and key/value lists nested deeper than this inside one attribute value are refused.
inline constexpr int kMaxValueDepth = 16;

/// An OTLP AnyValue. Strings are views into the decoded message (valid while its Batch lives).
struct Value {
  enum class Type : std::uint8_t { kEmpty, kString, kBool, kInt, kDouble, kArray, kKvList, kBytes };
  Type type = Type::kEmpty;
  std::string_view str;  ///< kString; kBytes: raw bytes (proto) or base64 text (JSON)
  std::int64_t i = 0;    ///< kInt
  double d = 0;          ///< kDouble
  bool b = false;        ///< kBool
  /// kArray: elements [first, first + count) of Batch::values; kKvList: entries
  /// [first, first + count) of Batch::attributes.
  std::uint32_t first = 0, count = 0;
};

struct Attribute {
  std::string_view key;
  Value value;
};

/// Attribute range [first, first + count) of Batch::attributes.
struct AttributeRange {
  std::uint32_t first = 0, count = 0;
};

struct Span {
  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> span_id{};
  std::array<std::uint8_t, 8> parent_span_id{};  ///< zeros for a root span
  bool root = true;                              ///< no parent span id (OTLP: empty parent_span_id)
  std::int32_t kind = 0;  ///< SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, …
  std::uint64_t start_ns = 0, end_ns = 0;  ///< Unix epoch, nanoseconds
  std::string_view name;
  AttributeRange attributes;
  std::uint32_t resource = 0;  ///< index into Batch::resources
};

/// One decoded message. Owns whatever the views point into besides the payload (the parsed
/// JSON document); for otlp_proto the views point into the payload itself, which must outlive
/// the Batch's use.
struct Batch {
  std::vector<Span> spans;
  std::vector<Attribute> attributes;      ///< span, resource and nested key/value entries
  std::vector<Value> values;              ///< array elements
  std::vector<AttributeRange> resources;  ///< each resource's attributes (index 0: none)
  std::size_t invalid_spans = 0;          ///< spans skipped: trace id not 16 bytes or zero
  std::shared_ptr<void> storage;          ///< the JSON document the views point into

  void clear();
  /// The attribute `key` of `range`, or nullptr (the first one when a key repeats). A range of
  /// more than kIndexedRange attributes is indexed on its first lookup, so that the cost of a
  /// message stays linear in its size when many spans look up one large resource (8,000
  /// spans × 8,000 resource attributes took 4.3 s under ASan by scanning).
  const Value* find(AttributeRange range, std::string_view key) const;

  static constexpr std::uint32_t kIndexedRange = 32;

 private:
  /// Indexes of the large ranges looked up so far, by the range's first attribute: key ->
  /// position in `attributes` (positions, so that a copy of the Batch stays right).
  mutable std::unordered_map<std::uint32_t, std::unordered_map<std::string_view, std::uint32_t>>
      index_;
};

/// Decodes an OTLP/JSON `ExportTraceServiceRequest` into `out` (cleared first). False with
/// `error` ("not JSON: …", "resourceSpans is not an array", "…nested deeper than 16…") when
/// the message is not one.
bool decodeJson(std::string_view payload, Batch& out, std::string& error);

/// Decodes a protobuf `ExportTraceServiceRequest` into `out` (cleared first); views point
/// into `payload`. False with `error` ("truncated varint at byte 12", "field 9 of Span has
/// wire type 1, expected 2", …) when the bytes are not one.
bool decodeProto(std::string_view payload, Batch& out, std::string& error);

/// Encodes an OTLP/JSON `ExportTraceServiceRequest` as protobuf (for `--replay FILE` with
/// `kafka.format: otlp_proto`: the same traces as the JSON lines, in the exporter's default
/// encoding). Keeps the fields decodeProto reads plus span kind and status; false with
/// `error` when decodeJson would refuse the text.
bool jsonToProto(std::string_view json, std::string& out, std::string& error);

/// Lower-case hexadecimal, as OTLP/JSON writes ids: 32 digits for a trace id.
std::string hex(const std::uint8_t* bytes, std::size_t n);

}  // namespace assay::otlp
