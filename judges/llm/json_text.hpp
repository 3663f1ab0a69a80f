#pragma once
/// JSON string literals written straight into a std::string, for the two texts every LLM call
/// escapes (prompt.cpp's data block, then the whole user message in the request body: about
/// 2 KB each for a dev event). RapidJSON's Writer::String, without its SIMD paths (they read
/// past the end of a buffer: RAPIDJSON_SSE2 stays off), spends about 19 instructions a byte
/// (callgrind, the dispatch bench); this one checks sixteen bytes at a time (SSE2, the x86-64
/// baseline; eight elsewhere), copies the runs that need no escape, and writes the same bytes.

#include <string>
#include <string_view>

namespace assay::llm {

/// Appends `s` to `out` as a JSON string literal, quotes included: the same bytes as
/// RapidJSON's `Writer<StringBuffer>::String` with its default flags (RFC 8259, section 7): '"'
/// and '\' escaped with a backslash, the control bytes 0x08, 0x09, 0x0A, 0x0C and 0x0D as \b,
/// \t, \n, \f and \r, the other bytes below 0x20 as \u00XX (upper-case hex digits); every other
/// byte (0x7F, '/', UTF-8 sequences, valid or not) as it is. The caller checks UTF-8 where it
/// matters (the event parser has).
void appendJsonString(std::string& out, std::string_view s);

}  // namespace assay::llm
