#pragma once
/// RFC 3339 date-times (RFC 3339 §5.6), as the judgments' `judged_at` and tracking.baseline_from.

#include <cstdint>
#include <optional>
#include <string_view>

namespace assay {

/// "2026-11-29T13:42:05Z", "2026-11-29T13:42:05.120Z", "2026-11-29T14:42:05+01:00" (a `t` or
/// space for `T` and `z` for `Z` accepted, fractions of any length) → Unix epoch milliseconds
/// (UTC, the fraction truncated to ms). nullopt when malformed or out of range (e.g. month 13).
std::optional<std::int64_t> parseRfc3339(std::string_view text);

}  // namespace assay
