#include "sources/otlp_decode.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cstring>

#include "core/json_limits.hpp"
#include "core/utf8.hpp"

namespace assay::otlp {

void Batch::clear() {
  index_.clear();
  spans.clear();
  attributes.clear();
  values.clear();
  resources.assign(1, AttributeRange{});
  invalid_spans = 0;
  storage.reset();
}

const Value* Batch::find(AttributeRange range, std::string_view key) const {
  if (range.count <= kIndexedRange) {
    for (std::uint32_t i = range.first; i < range.first + range.count; ++i)
      if (attributes[i].key == key) return &attributes[i].value;
    return nullptr;
  }
  auto [it, fresh] = index_.try_emplace(range.first);
  if (fresh) {
    it->second.reserve(range.count);
    for (std::uint32_t i = range.first; i < range.first + range.count; ++i)
      it->second.try_emplace(attributes[i].key, i);  // the first one wins
  }
  const auto found = it->second.find(key);
  return found == it->second.end() ? nullptr : &attributes[found->second].value;
}

std::string hex(const std::uint8_t* bytes, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

namespace {

template <std::size_t N>
bool allZero(const std::array<std::uint8_t, N>& a) {
  for (auto b : a)
    if (b != 0) return false;
  return true;
}

// ---- OTLP/JSON -------------------------------------------------------------------------------

using Json = rapidjson::Value;

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A hexadecimal id of exactly N bytes; false for anything else.
template <std::size_t N>
bool hexId(std::string_view s, std::array<std::uint8_t, N>& out) {
  if (s.size() != 2 * N) return false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = hexDigit(s[2 * i]), lo = hexDigit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return true;
}

const Json* member(const Json& object, const char* key) {
  if (!object.IsObject()) return nullptr;
  const auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

std::string_view view(const Json& v) { return {v.GetString(), v.GetStringLength()}; }

// int64 and uint64 are decimal strings in OTLP/JSON; numbers are accepted too.
bool jsonUint(const Json& v, std::uint64_t& out) {
  if (v.IsUint64()) {
    out = v.GetUint64();
    return true;
  }
  if (!v.IsString() || v.GetStringLength() == 0 || v.GetStringLength() > 20) return false;
  std::uint64_t n = 0;
  for (char c : view(v)) {
    if (c < '0' || c > '9') return false;
    const std::uint64_t next = n * 10 + static_cast<std::uint64_t>(c - '0');
    if (next / 10 != n) return false;  // overflow
    n = next;
  }
  out = n;
  return true;
}

bool jsonInt(const Json& v, std::int64_t& out) {
  if (v.IsInt64()) {
    out = v.GetInt64();
    return true;
  }
  if (v.IsString() && v.GetStringLength() > 0 && v.GetString()[0] == '-') {
    std::uint64_t magnitude = 0;
    rapidjson::Value rest(v.GetString() + 1, v.GetStringLength() - 1);  // a non-owning view
    if (!jsonUint(rest, magnitude) || magnitude > 9223372036854775808ULL) return false;
    out = static_cast<std::int64_t>(0 - magnitude);
    return true;
  }
  std::uint64_t u = 0;
  if (!jsonUint(v, u) || u > 9223372036854775807ULL) return false;
  out = static_cast<std::int64_t>(u);
  return true;
}

class JsonReader {
 public:
  JsonReader(Batch& out, std::string& error) : out_(out), error_(error) {}

  bool attributes(const Json* list, int depth, AttributeRange& range) {
    range = {};
    if (!list) return true;
    if (!list->IsArray()) return fail("attributes is not an array");
    const auto n = static_cast<std::uint32_t>(list->Size());
    range.first = static_cast<std::uint32_t>(out_.attributes.size());
    range.count = n;
    out_.attributes.resize(out_.attributes.size() + n);
    for (std::uint32_t i = 0; i < n; ++i) {
      const Json& kv = (*list)[i];
      const Json* key = member(kv, "key");
      Attribute a;
      if (key && key->IsString()) a.key = view(*key);
      if (const Json* v = member(kv, "value"); v && !value(*v, depth, a.value)) return false;
      out_.attributes[range.first + i] = a;
    }
    return true;
  }

  bool value(const Json& v, int depth, Value& out) {
    if (depth > kMaxValueDepth)
      return fail("attribute values nested deeper than " + std::to_string(kMaxValueDepth));
    out = Value{};
    if (!v.IsObject()) return true;  // an unknown shape is an empty value
    if (const Json* s = member(v, "stringValue"); s && s->IsString()) {
      out.type = Value::Type::kString;
      out.str = view(*s);
    } else if (const Json* b = member(v, "boolValue"); b && b->IsBool()) {
      out.type = Value::Type::kBool;
      out.b = b->GetBool();
    } else if (const Json* i = member(v, "intValue"); i && jsonInt(*i, out.i)) {
      out.type = Value::Type::kInt;
    } else if (const Json* d = member(v, "doubleValue"); d && d->IsNumber()) {
      out.type = Value::Type::kDouble;
      out.d = d->GetDouble();
    } else if (const Json* a = member(v, "arrayValue")) {
      const Json* list = member(*a, "values");
      out.type = Value::Type::kArray;
      if (!list) return true;
      if (!list->IsArray()) return fail("arrayValue.values is not an array");
      const auto n = static_cast<std::uint32_t>(list->Size());
      out.first = static_cast<std::uint32_t>(out_.values.size());
      out.count = n;
      out_.values.resize(out_.values.size() + n);
      for (std::uint32_t k = 0; k < n; ++k) {
        Value element;
        if (!value((*list)[k], depth + 1, element)) return false;
        out_.values[out.first + k] = element;
      }
    } else if (const Json* kv = member(v, "kvlistValue")) {
      AttributeRange r;
      if (!attributes(member(*kv, "values"), depth + 1, r)) return false;
      out.type = Value::Type::kKvList;
      out.first = r.first;
      out.count = r.count;
    } else if (const Json* y = member(v, "bytesValue"); y && y->IsString()) {
      out.type = Value::Type::kBytes;
      out.str = view(*y);
    }
    return true;
  }

  bool span(const Json& s, std::uint32_t resource) {
    if (!s.IsObject()) return fail("a span is not an object");
    Span sp;
    const Json* trace = member(s, "traceId");
    if (!trace || !trace->IsString() || !hexId(view(*trace), sp.trace_id) || allZero(sp.trace_id)) {
      ++out_.invalid_spans;
      return true;
    }
    if (const Json* id = member(s, "spanId"); id && id->IsString()) hexId(view(*id), sp.span_id);
    if (const Json* parent = member(s, "parentSpanId");
        parent && parent->IsString() && parent->GetStringLength() > 0) {
      sp.root = !hexId(view(*parent), sp.parent_span_id) || allZero(sp.parent_span_id);
    }
    if (const Json* name = member(s, "name"); name && name->IsString()) sp.name = view(*name);
    if (const Json* kind = member(s, "kind"); kind && kind->IsInt()) sp.kind = kind->GetInt();
    if (const Json* t = member(s, "startTimeUnixNano")) jsonUint(*t, sp.start_ns);
    if (const Json* t = member(s, "endTimeUnixNano")) jsonUint(*t, sp.end_ns);
    if (!attributes(member(s, "attributes"), 0, sp.attributes)) return false;
    sp.resource = resource;
    out_.spans.push_back(sp);
    return true;
  }

  bool request(const Json& doc) {
    if (!doc.IsObject()) return fail("not a JSON object (an ExportTraceServiceRequest)");
    const Json* rs = member(doc, "resourceSpans");
    if (!rs) return true;  // an empty request
    if (!rs->IsArray()) return fail("resourceSpans is not an array");
    for (const Json& r : rs->GetArray()) {
      if (!r.IsObject()) return fail("a resourceSpans entry is not an object");
      AttributeRange res;
      if (const Json* resource = member(r, "resource");
          resource && !attributes(member(*resource, "attributes"), 0, res))
        return false;
      const auto index = static_cast<std::uint32_t>(out_.resources.size());
      out_.resources.push_back(res);
      const Json* scopes = member(r, "scopeSpans");
      if (!scopes) continue;
      if (!scopes->IsArray()) return fail("scopeSpans is not an array");
      for (const Json& sc : scopes->GetArray()) {
        const Json* spans = member(sc, "spans");
        if (!spans) continue;
        if (!spans->IsArray()) return fail("spans is not an array");
        for (const Json& s : spans->GetArray())
          if (!span(s, index)) return false;
      }
    }
    return true;
  }

 private:
  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }
  Batch& out_;
  std::string& error_;
};

// ---- protobuf wire format --------------------------------------------------------------------

// proto3 `string` fields are UTF-8 (protobuf's parsers refuse anything else): core/utf8.hpp.

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

class Wire {
 public:
  Wire(std::string_view data, std::size_t base) : data_(data), base_(base) {}
  bool done() const { return pos_ >= data_.size(); }
  std::size_t at() const { return base_ + pos_; }

  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const auto byte = static_cast<std::uint8_t>(data_[pos_++]);
      v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }
  bool fixed(std::size_t n, std::uint64_t& v) {
    if (data_.size() - pos_ < n) return false;
    v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    return true;
  }
  bool bytes(std::string_view& out, std::size_t& offset) {
    std::uint64_t n = 0;
    if (!varint(n) || n > data_.size() - pos_) return false;
    offset = base_ + pos_;
    out = data_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return true;
  }
  bool skip(int wire_type) {
    std::uint64_t v = 0;
    std::string_view s;
    std::size_t offset = 0;
    switch (wire_type) {
      case kVarint:
        return varint(v);
      case kFixed64:
        return fixed(8, v);
      case kLen:
        return bytes(s, offset);
      case kFixed32:
        return fixed(4, v);
      default:
        return false;  // groups are not used by OTLP
    }
  }

 private:
  std::string_view data_;
  std::size_t base_;
  std::size_t pos_ = 0;
};

// One field of a message: its number, wire type and payload.
struct Field {
  std::uint32_t number = 0;
  int wire_type = 0;
  std::uint64_t scalar = 0;  // varint / fixed
  std::string_view bytes;    // kLen
  std::size_t offset = 0;    // of the payload, in the whole message
};

class ProtoReader {
 public:
  ProtoReader(Batch& out, std::string& error) : out_(out), error_(error) {}

  // Calls f(field) for each field of the message in `data`; false on malformed bytes.
  template <typename F>
  bool fields(std::string_view data, std::size_t base, const char* message, F&& f) {
    Wire w(data, base);
    while (!w.done()) {
      const std::size_t start = w.at();
      std::uint64_t tag = 0;
      if (!w.varint(tag)) return fail("truncated field tag in " + std::string(message), start);
      Field fd;
      fd.number = static_cast<std::uint32_t>(tag >> 3);
      fd.wire_type = static_cast<int>(tag & 7);
      if (fd.number == 0) return fail("field number 0 in " + std::string(message), start);
      bool ok = true;
      switch (fd.wire_type) {
        case kVarint:
          ok = w.varint(fd.scalar);
          break;
        case kFixed64:
          ok = w.fixed(8, fd.scalar);
          break;
        case kFixed32:
          ok = w.fixed(4, fd.scalar);
          break;
        case kLen:
          ok = w.bytes(fd.bytes, fd.offset);
          break;
        default:
          return fail("wire type " + std::to_string(fd.wire_type) + " (a group) in " + message,
                      start);
      }
      if (!ok)
        return fail("truncated field " + std::to_string(fd.number) + " of " + message, start);
      if (!f(fd)) return false;
    }
    return true;
  }

  // Repeated message field `number` of `data`, decoded into a contiguous block of attributes.
  bool keyValues(std::string_view data, std::size_t base, const char* message, std::uint32_t number,
                 int depth, AttributeRange& range) {
    std::uint32_t n = 0;
    if (!fields(data, base, message, [&](const Field& f) {
          n += f.number == number && f.wire_type == kLen;
          return true;
        }))
      return false;
    range.first = static_cast<std::uint32_t>(out_.attributes.size());
    range.count = n;
    out_.attributes.resize(out_.attributes.size() + n);
    std::uint32_t i = 0;
    return fields(data, base, message, [&](const Field& f) {
      if (f.number != number || f.wire_type != kLen) return true;
      Attribute a;
      if (!fields(f.bytes, f.offset, "KeyValue", [&](const Field& kv) {
            if (kv.number == 1 && kv.wire_type == kLen) {
              if (!isValidUtf8(kv.bytes))
                return fail("not UTF-8: invalid UTF-8 in a key", kv.offset);
              a.key = kv.bytes;
            }
            if (kv.number == 2 && kv.wire_type == kLen) return anyValue(kv, depth, a.value);
            return true;
          }))
        return false;
      out_.attributes[range.first + i++] = a;
      return true;
    });
  }

  bool anyValue(const Field& field, int depth, Value& out) {
    if (depth > kMaxValueDepth)
      return fail("attribute values nested deeper than " + std::to_string(kMaxValueDepth),
                  field.offset);
    out = Value{};
    return fields(field.bytes, field.offset, "AnyValue", [&](const Field& f) {
      switch (f.number) {
        case 1:
          if (f.wire_type == kLen) {
            if (!isValidUtf8(f.bytes))
              return fail("not UTF-8: invalid UTF-8 in a string value", f.offset);
            out.type = Value::Type::kString, out.str = f.bytes;
          }
          break;
        case 2:
          if (f.wire_type == kVarint) out.type = Value::Type::kBool, out.b = f.scalar != 0;
          break;
        case 3:
          if (f.wire_type == kVarint)
            out.type = Value::Type::kInt, out.i = static_cast<std::int64_t>(f.scalar);
          break;
        case 4:
          if (f.wire_type == kFixed64) {
            out.type = Value::Type::kDouble;
            std::memcpy(&out.d, &f.scalar, sizeof out.d);
          }
          break;
        case 5:
          if (f.wire_type == kLen) return array(f, depth, out);
          break;
        case 6:
          if (f.wire_type == kLen) {
            AttributeRange r;
            if (!keyValues(f.bytes, f.offset, "KeyValueList", 1, depth + 1, r)) return false;
            out.type = Value::Type::kKvList;
            out.first = r.first;
            out.count = r.count;
          }
          break;
        case 7:
          if (f.wire_type == kLen) out.type = Value::Type::kBytes, out.str = f.bytes;
          break;
        default:
          break;
      }
      return true;
    });
  }

  bool array(const Field& field, int depth, Value& out) {
    std::uint32_t n = 0;
    if (!fields(field.bytes, field.offset, "ArrayValue", [&](const Field& f) {
          n += f.number == 1 && f.wire_type == kLen;
          return true;
        }))
      return false;
    out.type = Value::Type::kArray;
    out.first = static_cast<std::uint32_t>(out_.values.size());
    out.count = n;
    out_.values.resize(out_.values.size() + n);
    std::uint32_t i = 0;
    const std::uint32_t first = out.first;
    return fields(field.bytes, field.offset, "ArrayValue", [&](const Field& f) {
      if (f.number != 1 || f.wire_type != kLen) return true;
      Value element;
      if (!anyValue(f, depth + 1, element)) return false;
      out_.values[first + i++] = element;
      return true;
    });
  }

  template <std::size_t N>
  static bool id(const Field& f, std::array<std::uint8_t, N>& out) {
    if (f.wire_type != kLen || f.bytes.size() != N) return false;
    std::memcpy(out.data(), f.bytes.data(), N);
    return true;
  }

  bool span(const Field& field, std::uint32_t resource) {
    Span sp;
    bool trace_ok = false;
    if (!fields(field.bytes, field.offset, "Span", [&](const Field& f) {
          switch (f.number) {
            case 1:
              trace_ok = id(f, sp.trace_id);
              break;
            case 2:
              id(f, sp.span_id);
              break;
            case 4:
              sp.root = !id(f, sp.parent_span_id) || allZero(sp.parent_span_id);
              break;
            case 5:
              if (f.wire_type == kLen) {
                if (!isValidUtf8(f.bytes))
                  return fail("not UTF-8: invalid UTF-8 in a span name", f.offset);
                sp.name = f.bytes;
              }
              break;
            case 6:
              if (f.wire_type == kVarint) sp.kind = static_cast<std::int32_t>(f.scalar);
              break;
            case 7:
              if (f.wire_type == kFixed64) sp.start_ns = f.scalar;
              break;
            case 8:
              if (f.wire_type == kFixed64) sp.end_ns = f.scalar;
              break;
            default:
              break;
          }
          return true;
        }))
      return false;
    if (!trace_ok || allZero(sp.trace_id)) {
      ++out_.invalid_spans;
      return true;
    }
    if (!keyValues(field.bytes, field.offset, "Span", 9, 0, sp.attributes)) return false;
    sp.resource = resource;
    out_.spans.push_back(sp);
    return true;
  }

  bool resourceSpans(const Field& field) {
    // The resource first (its field may follow the spans on the wire), then the spans.
    AttributeRange res;
    if (!fields(field.bytes, field.offset, "ResourceSpans", [&](const Field& f) {
          if (f.number != 1 || f.wire_type != kLen) return true;
          return keyValues(f.bytes, f.offset, "Resource", 1, 0, res);
        }))
      return false;
    const auto index = static_cast<std::uint32_t>(out_.resources.size());
    out_.resources.push_back(res);
    return fields(field.bytes, field.offset, "ResourceSpans", [&](const Field& f) {
      if (f.number != 2 || f.wire_type != kLen) return true;
      return fields(f.bytes, f.offset, "ScopeSpans", [&](const Field& s) {
        if (s.number != 2 || s.wire_type != kLen) return true;
        return span(s, index);
      });
    });
  }

  bool request(std::string_view payload) {
    return fields(payload, 0, "ExportTraceServiceRequest", [&](const Field& f) {
      if (f.number != 1 || f.wire_type != kLen) return true;
      return resourceSpans(f);
    });
  }

 private:
  bool fail(const std::string& message, std::size_t offset) {
    error_ = message + " at byte " + std::to_string(offset);
    return false;
  }
  Batch& out_;
  std::string& error_;
};

// ---- protobuf writer (jsonToProto) ------------------------------------------------------------

void putVarint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void putTag(std::string& out, std::uint32_t number, int wire_type) {
  putVarint(out, (static_cast<std::uint64_t>(number) << 3) | static_cast<std::uint64_t>(wire_type));
}
void putBytes(std::string& out, std::uint32_t number, std::string_view bytes) {
  putTag(out, number, kLen);
  putVarint(out, bytes.size());
  out.append(bytes);
}
void putFixed64(std::string& out, std::uint32_t number, std::uint64_t v) {
  putTag(out, number, kFixed64);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string encodeValue(const Batch& b, const Value& v);

std::string encodeKeyValues(const Batch& b, AttributeRange r, std::uint32_t number) {
  std::string out;
  for (std::uint32_t i = r.first; i < r.first + r.count; ++i) {
    std::string kv;
    putBytes(kv, 1, b.attributes[i].key);
    putBytes(kv, 2, encodeValue(b, b.attributes[i].value));
    putBytes(out, number, kv);
  }
  return out;
}

std::string encodeValue(const Batch& b, const Value& v) {
  std::string out;
  switch (v.type) {
    case Value::Type::kString:
      putBytes(out, 1, v.str);
      break;
    case Value::Type::kBool:
      putTag(out, 2, kVarint);
      putVarint(out, v.b ? 1 : 0);
      break;
    case Value::Type::kInt:
      putTag(out, 3, kVarint);
      putVarint(out, static_cast<std::uint64_t>(v.i));
      break;
    case Value::Type::kDouble: {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &v.d, sizeof bits);
      putFixed64(out, 4, bits);
      break;
    }
    case Value::Type::kArray: {
      std::string array;
      for (std::uint32_t i = v.first; i < v.first + v.count; ++i)
        putBytes(array, 1, encodeValue(b, b.values[i]));
      putBytes(out, 5, array);
      break;
    }
    case Value::Type::kKvList:
      putBytes(out, 6, encodeKeyValues(b, AttributeRange{v.first, v.count}, 1));
      break;
    case Value::Type::kBytes:  // base64 text in JSON: kept as it is (assay reads none)
      putBytes(out, 7, v.str);
      break;
    case Value::Type::kEmpty:
      break;
  }
  return out;
}

}  // namespace

bool decodeJson(std::string_view payload, Batch& out, std::string& error) {
  out.clear();
  if (const auto problem = jsonShapeProblem(payload)) {
    error = (problem->kind == JsonShapeProblem::Kind::kNotUtf8 ? "not UTF-8: " : "") +
            problem->message();
    return false;
  }
  auto doc = std::make_shared<rapidjson::Document>();
  doc->Parse<rapidjson::kParseValidateEncodingFlag>(payload.data(), payload.size());
  if (doc->HasParseError()) {
    error = std::string("not JSON: ") + rapidjson::GetParseError_En(doc->GetParseError()) +
            " at byte " + std::to_string(doc->GetErrorOffset());
    return false;
  }
  out.storage = doc;
  JsonReader reader(out, error);
  if (!reader.request(*doc)) {
    out.spans.clear();
    return false;
  }
  return true;
}

bool decodeProto(std::string_view payload, Batch& out, std::string& error) {
  out.clear();
  ProtoReader reader(out, error);
  if (!reader.request(payload)) {
    out.spans.clear();
    return false;
  }
  return true;
}

bool jsonToProto(std::string_view json, std::string& out, std::string& error) {
  Batch b;
  if (!decodeJson(json, b, error)) return false;
  out.clear();
  for (std::uint32_t r = 1; r < b.resources.size(); ++r) {
    std::string spans;
    for (const auto& s : b.spans) {
      if (s.resource != r) continue;
      std::string sp;
      putBytes(sp, 1, {reinterpret_cast<const char*>(s.trace_id.data()), s.trace_id.size()});
      putBytes(sp, 2, {reinterpret_cast<const char*>(s.span_id.data()), s.span_id.size()});
      if (!s.root)
        putBytes(sp, 4,
                 {reinterpret_cast<const char*>(s.parent_span_id.data()), s.parent_span_id.size()});
      putBytes(sp, 5, s.name);
      if (s.kind != 0) {
        putTag(sp, 6, kVarint);
        putVarint(sp, static_cast<std::uint64_t>(s.kind));
      }
      putFixed64(sp, 7, s.start_ns);
      putFixed64(sp, 8, s.end_ns);
      sp += encodeKeyValues(b, s.attributes, 9);
      putBytes(spans, 2, sp);
    }
    std::string resource_spans;
    putBytes(resource_spans, 1, encodeKeyValues(b, b.resources[r], 1));
    putBytes(resource_spans, 2, spans);
    putBytes(out, 1, resource_spans);
  }
  return true;
}

}  // namespace assay::otlp
