#pragma once
/// Reading an LLM judge's reply into a verdict. The reply must be one JSON object
///   {"justification": <string>, "unsupported_claim": <string or null>,
///    "score": <integer in the rubric's range, or null>}
/// (members in any order; the prompt asks for this one, the reasoning first, and
/// `unsupported_claim` only of faithfulness). `"score": null` with a justification is the
/// judge declining to score: outcome `abstained`, the justification kept as the reason.
/// validated with RapidJSON's JSON Schema validator (draft-04). Only the top-level `score` of
/// the parsed object counts: a score planted anywhere else (nested objects, the justification,
/// the judged answer itself) is never read.
///
/// Accepted leniency, and nothing more: a UTF-8 byte-order mark and one leading
/// `<think>…</think>` block (reasoning models) before the reply, one markdown fence around the
/// whole object
/// (```json … ``` or ``` … ```; a fence inside the justification's string is text), surrounding
/// white space, and a score given as a string of ASCII digits ("3"). Rejected as
/// `schema_error`, never coerced: "3/4", "three", 0.8 or 3.0 on an integer scale, 7.5e30, an
/// out-of-range integer, a missing justification, text around the object, several objects, a key
/// that occurs twice in one object ({"score": 1, "score": 4}: which did the model mean?).
/// `unsupported_claim` may be a string, null or a list of strings (joined with "; "); "",
/// "None", "null" and "N/A" mean no claim. The justification and the claim are capped at
/// kMaxJustificationBytes (cut on a character boundary, "…" added).
///
/// Refusals are `refused`, not `schema_error`: the provider's own flag (FinishReason::kRefusal),
/// a reply without a verdict whose first 400 bytes carry a refusal phrase (English, French,
/// Spanish, German: "I'm sorry, but…", "I cannot evaluate…", "Je ne peux pas…", "Désolé,
/// mais…"), or an object without a score whose `refusal` member or a string member declines.

#include <rapidjson/fwd.h>

#include <optional>
#include <string>
#include <string_view>

#include "core/verdict.hpp"

namespace assay::llm {

/// The longest justification (and unsupported claim) kept from a reply, bytes: a verdict is a
/// metric's evidence, not a document; a runaway reply must not fill the judgments file.
inline constexpr std::size_t kMaxJustificationBytes = 2000;

struct LlmVerdict {
  Outcome outcome = Outcome::kSchemaError;
  std::optional<int> score;   ///< iff outcome == kOk
  std::string justification;  ///< the judge's words (kOk, kAbstained), or what was wrong
  std::optional<std::string> unsupported_claim;
};

/// How the provider said the reply ended, normalised across APIs.
enum class FinishReason { kStop, kLength, kRefusal, kOther };

/// Parses `content` (the assistant message text) for a rubric scoring `min_score`..`max_score`.
/// `finish`: kLength → kTruncated whatever the text (a cut reply, even all white space, is not
/// judged), kRefusal → kRefused. A reply with no JSON object that reads as a refusal
/// ("I can't help with that") → kRefused; anything else invalid → kSchemaError with the reason
/// in `justification`.
LlmVerdict parseVerdict(std::string_view content, FinishReason finish, int min_score,
                        int max_score);

/// Reads `content` as one JSON object valid against `schema` (JSON Schema draft-04, as text),
/// with the same leniency as a verdict: one markdown fence around the whole object and white
/// space, nothing else (no text around it, no second object). Bounded by jsonShapeProblem
/// (json_limits.hpp) before parsing. Returns "" and fills `out`, or why not: "empty reply",
/// "reply is not a JSON object", "not JSON: … at byte N", "violates the schema ('keyword' at
/// #/pointer)". Throws std::invalid_argument when `schema` itself is not JSON.
std::string parseSchemaObject(std::string_view content, const std::string& schema,
                              rapidjson::Document& out);

/// The JSON Schema (draft-04) a verdict must satisfy for a min..max rubric, as text: what the
/// reply is validated against (more lenient than the schema sent to providers, replySchema() in
/// prompt.hpp: a score of digits in a string, a list of claims, extra members).
std::string verdictSchema(int min_score, int max_score);

}  // namespace assay::llm
