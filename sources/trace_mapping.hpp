#pragma once
/// Which span of an OpenTelemetry trace says what about the RAG request (docs/events.md,
/// "OpenTelemetry traces"). Two conventions are built in, selected by `otlp.mapping`, and
/// every attribute name can be overridden in `otlp.attributes`:
///  - `openinference` (Arize Phoenix's OpenInference): `openinference.span.kind` RETRIEVER
///    spans carry the query in `input.value` and the documents flattened as
///    `retrieval.documents.N.document.{id,content,score,metadata}`; LLM spans the answer in
///    `llm.output_messages.N.message.{role,content}` (else `output.value`), the model in
///    `llm.model_name`, the prompt in `llm.input_messages.N.message.{role,content}`.
///  - `gen_ai` (OpenTelemetry GenAI semantic conventions): `gen_ai.operation.name` retrieval
///    spans carry `gen_ai.retrieval.query.text` and `gen_ai.retrieval.documents` (a list of
///    {id, content, score, source}); chat / text_completion / generate_content spans carry
///    `gen_ai.output.messages` and `gen_ai.input.messages` ({role, parts: [{type: text,
///    content}]}), the model in `gen_ai.response.model` (else `gen_ai.request.model`). Lists
///    may be structured attribute values or JSON strings, as the conventions allow both.
/// Tenant, app and variant come from attributes of the span or its resource (`tenant.id`,
/// `service.name`, `assay.variant` by default), the root span's first; a reference answer
/// from `assay.reference` on any span.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/event.hpp"
#include "sources/otlp_decode.hpp"

namespace assay {

struct TraceMapping {
  enum class Shape { kOpenInference, kGenAi };
  /// How documents and messages are laid out: flattened keys `PREFIX.N.document.content`
  /// (OpenInference) or one list-valued attribute (GenAI).
  Shape shape = Shape::kOpenInference;
  std::string span_kind;                      ///< the attribute that names a span's role
  std::vector<std::string> retrieval_kinds;   ///< its values for a retrieval span
  std::vector<std::string> generation_kinds;  ///< its values for an LLM call
  std::string query;                          ///< retrieval span (and root span): the question
  std::string documents;        ///< retrieval span: the documents (prefix or list attribute)
  std::string output_messages;  ///< LLM span: the reply messages (prefix or list attribute)
  std::string answer;           ///< LLM span: a plain-text answer when no message is recorded
  std::string input_messages;   ///< LLM span: the prompt messages (the last user turn)
  std::string model, fallback_model;
  std::string tenant, app, variant;
  /// Any span (root first): a ground-truth answer, for the judges that compare with one
  /// (offline or labelled traffic; no convention defines it).
  std::string reference;
};

/// The keys `otlp.attributes` may override, in documentation order.
const std::vector<std::string_view>& traceMappingKeys();

/// The built-in mapping `name` ("openinference" or "gen_ai"); nullopt for another name.
std::optional<TraceMapping> builtinTraceMapping(std::string_view name);

/// Sets one key of traceMappingKeys() (retrieval_kind and generation_kind take a
/// comma-separated list); false for an unknown key or an empty value.
bool overrideTraceMapping(TraceMapping& m, std::string_view key, std::string_view value);

/// What one span says about the request.
struct SpanParts {
  enum class Role { kOther, kRetrieval, kGeneration };
  Role role = Role::kOther;
  std::string question;           ///< retrieval or root: the query; LLM: the last user message
  std::vector<Context> contexts;  ///< retrieval: the documents in rank order (N, list order)
  bool has_contexts = false;      ///< retrieval: the documents attribute was there
  std::string answer, model;      ///< LLM span
  std::string tenant, app, variant;
  std::optional<std::string> reference;
  /// Bytes of text held (for otlp.max_bytes).
  std::size_t bytes() const;
};

/// At most this many documents are read from one retrieval span (beyond: ignored).
inline constexpr std::size_t kMaxTraceContexts = 256;

/// Reads one span with `m`. Never throws; strings are copied out of the batch.
SpanParts extractSpanParts(const otlp::Batch& b, const otlp::Span& s, const TraceMapping& m);

}  // namespace assay
