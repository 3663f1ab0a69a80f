#pragma once
/// One judged event as written by every sink (docs/events.md, "Output").

#include <cstdint>
#include <string>
#include <vector>

#include "judges/verdict.hpp"

namespace assay {

struct JudgedVerdict {
  std::string judge;      ///< configured judge name
  std::string criterion;  ///< from the judge's descriptor
  Verdict verdict;
  double min_score = 0, max_score = 1;
  double latency_ms = 0;  ///< wall time of this judge on this event, milliseconds
};

struct Judgment {
  std::string id, tenant, app, variant;
  std::int64_t judged_at_ms = 0;  ///< Unix epoch milliseconds (UTC)
  std::vector<JudgedVerdict> verdicts;
  bool backfill = false;  ///< judged by `assay backfill` (written as "backfill": true)
};

/// Compact one-line JSON object, keys in the order of docs/events.md: `judged_at` as RFC 3339 UTC
/// with milliseconds; `score` null and `error` = outcome name when the judge could not judge;
/// optional keys (`passed`, `evidence`) only when set. No trailing newline.
std::string toJson(const Judgment& j);

/// RFC 3339 UTC timestamp with milliseconds, e.g. "2026-11-29T13:42:05.120Z".
std::string formatRfc3339(std::int64_t epoch_ms);

}  // namespace assay
