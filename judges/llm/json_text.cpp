#include "judges/llm/json_text.hpp"

#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace assay::llm {
namespace {

constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

/// Nonzero when one of the eight bytes of `w` is below 0x20, '"' or '\' ("Bit Twiddling
/// Hacks", S. E. Anderson: hasless(x, n) for n <= 128, and haszero(x ^ c); exact for "any").
constexpr std::uint64_t needsEscape(std::uint64_t w) {
  const auto zero = [](std::uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  return ((w - 0x20 * kOnes) & ~w & kHighs) | zero(w ^ (0x22 * kOnes)) | zero(w ^ (0x5C * kOnes));
}

/// The escape of each byte (0: none), as RapidJSON's Writer::WriteString has it.
constexpr char escapeOf(unsigned char c) {
  switch (c) {
    case '\b':
      return 'b';
    case '\t':
      return 't';
    case '\n':
      return 'n';
    case '\f':
      return 'f';
    case '\r':
      return 'r';
    case '"':
      return '"';
    case '\\':
      return '\\';
    default:
      return c < 0x20 ? 'u' : 0;
  }
}

}  // namespace

void appendJsonString(std::string& out, std::string_view s) {
  out.reserve(out.size() + s.size() + 2);  // the escapes, if any, grow it
  out.push_back('"');
  const char* p = s.data();
  const char* const end = p + s.size();
  const char* run = p;  // the bytes since the last escape, copied at once
  while (p < end) {
#if defined(__SSE2__)  // the x86-64 baseline: sixteen bytes at a time, unaligned, in bounds
    if (end - p >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));  // NOLINT
      const __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1F)),
                                             _mm_set1_epi8(0x1F));  // bytes <= 0x1F
      const __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                           _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
      if (_mm_movemask_epi8(_mm_or_si128(control, special)) == 0) {
        p += 16;
        continue;
      }
    }
#endif
    if (end - p >= 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, p, 8);
      if (needsEscape(w) == 0) {
        p += 8;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(*p);
    const char e = escapeOf(c);
    if (e == 0) {
      ++p;
      continue;
    }
    out.append(run, static_cast<std::size_t>(p - run));
    out.push_back('\\');
    out.push_back(e);
    if (e == 'u') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const char digits[4] = {'0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out.append(digits, 4);
    }
    run = ++p;
  }
  out.append(run, static_cast<std::size_t>(end - run));
  out.push_back('"');
}

}  // namespace assay::llm
