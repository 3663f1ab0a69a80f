#pragma once
/// What an LLM judge's call costs: model prices, the token usage a provider reports, and the
/// arithmetic between them (docs/configuration.md, "Money").
///
/// Cost = tokens × the model's price per million tokens (USD), converted to euros with
/// `budget.usd_to_eur`. The token counts come from the provider's own `usage` object; when a
/// reply has none, the caller charges `estimateUsage()` instead (and counts it), so a missing
/// `usage` can never make a call free.

#include <rapidjson/fwd.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace assay::llm {

/// A model's list price, USD per million (1e6) tokens, standard (non-batch) tier.
/// A provider with no discounted rate for cached prompt tokens (Mistral, most self-hosted
/// endpoints) has `cached_input_usd_per_mtok == input_usd_per_mtok`: see `uncachedPrice()`.
struct ModelPrice {
  double input_usd_per_mtok = 0;         ///< prompt tokens not served from a cache
  double cached_input_usd_per_mtok = 0;  ///< prompt tokens read from the provider's cache
  double output_usd_per_mtok = 0;        ///< completion tokens, reasoning tokens included
  /// Prompt tokens written to the provider's cache (Anthropic `cache_creation_input_tokens`:
  /// 1.25× input for the 5-minute cache; a 1-hour cache write, 2×, needs an override).
  double cache_write_usd_per_mtok = 0;
};

/// Anthropic's 5-minute prompt-cache write price as a multiple of the base input price
/// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing, 2025-08):
/// the default `cache_write` of a configured price, the safe side for providers that do not
/// charge writes (OpenAI never reports any).
inline constexpr double kDefaultCacheWriteMultiplier = 1.25;

/// A price with no cached-input discount and no cache-write premium (Mistral, self-hosted).
constexpr ModelPrice uncachedPrice(double input_usd_per_mtok, double output_usd_per_mtok) {
  return {input_usd_per_mtok, input_usd_per_mtok, output_usd_per_mtok, input_usd_per_mtok};
}

/// The batch APIs' price as a share of the list price: OpenAI's Batch API ("a 50% discount",
/// https://platform.openai.com/docs/guides/batch) and Anthropic's Message Batches ("50% of
/// standard API prices", https://docs.anthropic.com/en/docs/build-with-claude/batch-processing),
/// both read 2026-11. Every token class is halved.
inline constexpr double kBatchPriceShare = 0.5;

/// `list` at kBatchPriceShare.
constexpr ModelPrice batchPrice(const ModelPrice& list) {
  return {list.input_usd_per_mtok * kBatchPriceShare,
          list.cached_input_usd_per_mtok * kBatchPriceShare,
          list.output_usd_per_mtok * kBatchPriceShare,
          list.cache_write_usd_per_mtok * kBatchPriceShare};
}

/// Token counts of one call, normalised across providers.
/// `cached_prompt_tokens` and `cache_write_prompt_tokens` are disjoint SUBSETS of
/// `prompt_tokens` (OpenAI reports cached tokens inside prompt_tokens; Anthropic's
/// input_tokens excludes them, so parseAnthropicUsage() adds them back). `reasoning_tokens`
/// (OpenAI `completion_tokens_details.reasoning_tokens`) is a SUBSET of `completion_tokens`,
/// priced at the output rate and never counted twice.
struct TokenUsage {
  std::int64_t prompt_tokens = 0;         ///< every input token, cached or not
  std::int64_t cached_prompt_tokens = 0;  ///< prompt tokens read from the provider's cache
  std::int64_t completion_tokens = 0;     ///< output tokens, reasoning included
  bool reported = true;                   ///< false: an estimate, the provider sent no usage
  /// Prompt tokens written to the provider's prompt cache (Anthropic's
  /// `cache_creation_input_tokens`, natively or through an OpenAI-compatible gateway).
  std::int64_t cache_write_prompt_tokens = 0;
  /// Completion tokens spent on reasoning (OpenAI `completion_tokens_details.reasoning_tokens`).
  std::int64_t reasoning_tokens = 0;

  /// The disjoint classes, for `assay_judge_tokens_total{direction}`: input (neither cached
  /// nor written), cached_input, cache_write, output (not reasoning), reasoning. Their sum is
  /// prompt_tokens + completion_tokens.
  struct Classes {
    std::int64_t input, cached_input, cache_write, output, reasoning;
  };
  Classes classes() const;
};

/// Cost of one call in USD:
///   ((prompt − cached − cache_write)·input + cached·cached_input
///     + cache_write·cache_write_price + completion·output) / 1e6.
/// Negative counts are read as 0, and cached / cache-write counts are clamped to the prompt, so
/// an inconsistent usage never yields a negative or discounted-below-zero cost.
/// Example (issue 3): prompt 2,400 of which 2,000 cached, completion 100, at $2.50 / $1.25 /
/// $10.00 → (400·2.50 + 2000·1.25 + 100·10.00) / 1e6 = $0.0045. Cache writes (issue 9): 20
/// input, 8,000 written, 400 output at $3.00 / $3.75 (write) / $15.00 → $0.03606.
double costUsd(const ModelPrice& price, const TokenUsage& usage);

/// `usd` × `usd_to_eur` (EUR per USD, the `budget.usd_to_eur` setting, e.g. 0.92).
double costEur(double usd, double usd_to_eur);

/// Which table entry priced a model name, and at what price.
struct PriceMatch {
  std::string name;  ///< the table key: the model itself, or the base name of its snapshot
  ModelPrice price;
};

/// Model name → price. `builtin()` holds the providers' published list prices; the
/// configuration may override an entry or add one (`set`). A judge whose model `find`s no
/// price refuses to start: an unpriced model must not bypass the budget.
class PriceTable {
 public:
  /// List prices, USD per million tokens, standard tier, text tokens, as published on these
  /// pages in 2025 (table dated 2025-08; providers change prices — check the pages and
  /// override in the configuration when they differ):
  ///   OpenAI     https://openai.com/api/pricing/ and https://platform.openai.com/docs/pricing
  ///   Anthropic  https://docs.anthropic.com/en/docs/about-claude/pricing (cache hits 0.1× input)
  ///   Mistral    https://mistral.ai/pricing#api-pricing (no cached-input rate)
  /// Not modelled: batch/flex/priority tiers, Anthropic's long-context (> 200k prompt tokens)
  /// premium, audio/image tokens, tool fees. Snapshot names priced differently from their base
  /// name have their own entry (gpt-4o-2024-05-13 is $5.00 / $15.00, not gpt-4o's price).
  static PriceTable builtin();

  /// Adds `model` or replaces its price (configuration overrides, `assay estimate --price`).
  void set(std::string model, ModelPrice price);

  /// The price of `model`: the entry of that exact name, else the longest entry that `model`
  /// extends with a snapshot suffix only — "-" or "@" followed by a date or version of at
  /// least four digits ("gpt-4o-mini-2024-07-18", "claude-3-5-haiku-20241022",
  /// "claude-3-5-haiku@20241022", "mistral-large-2411") or by "latest"
  /// ("claude-3-5-haiku-latest"). Any other extension is a different model and is NOT priced
  /// by its prefix: "gpt-4o-mini-2024-07-18" is gpt-4o-mini, never gpt-4o; "gpt-4o-mini-x",
  /// "o3-pro" or "gpt-4o-realtime-preview" are unknown (nullopt), because pricing them as
  /// gpt-4o-mini / o3 / gpt-4o would under-charge the budget. Names are case-sensitive.
  std::optional<ModelPrice> find(std::string_view model) const;

  /// As find(), also naming the entry that matched.
  std::optional<PriceMatch> match(std::string_view model) const;

  const std::map<std::string, ModelPrice, std::less<>>& entries() const { return prices_; }

 private:
  std::map<std::string, ModelPrice, std::less<>> prices_;
};

/// Token usage of an OpenAI chat-completions response body (also vLLM, Ollama, llama.cpp
/// server, Mistral and other compatible endpoints): `usage.prompt_tokens`,
/// `usage.completion_tokens` (required, non-negative integers) and
/// `usage.prompt_tokens_details.cached_tokens` (a missing or null details object, or a
/// missing or null count, means 0), `usage.completion_tokens_details.reasoning_tokens` (inside
/// completion_tokens), and the cache writes a gateway in front of Anthropic reports (LiteLLM
/// and others): `usage.cache_creation_input_tokens`, inside prompt_tokens. nullopt when
/// `usage` is missing, null or malformed (a count that is not a non-negative integer, cached +
/// written > prompt, reasoning > completion); the caller then charges estimateUsage() and
/// counts the event.
std::optional<TokenUsage> parseOpenAiUsage(const rapidjson::Value& response);

/// Token usage of an Anthropic Messages API response body: `usage.input_tokens` and
/// `usage.output_tokens` (required), `usage.cache_read_input_tokens` and
/// `usage.cache_creation_input_tokens` (missing or null = 0). Anthropic's input_tokens EXCLUDES
/// cache reads and writes, so prompt = input + cache_read + cache_creation, cached =
/// cache_read, cache_write = cache_creation. nullopt as for parseOpenAiUsage().
std::optional<TokenUsage> parseAnthropicUsage(const rapidjson::Value& response);

/// The usage charged when a reply carries none: the prompt estimate in, `max_tokens` (the
/// most the call could have produced) out, nothing cached, `reported = false`. Negative
/// arguments are read as 0.
TokenUsage estimateUsage(std::int64_t prompt_tokens_estimate, std::int64_t max_tokens);

/// A conservative token count for `text` without the model's tokenizer: ceil(UTF-8 bytes / 3).
/// BPE tokenizers (cl100k/o200k, Claude's) average about 4 bytes per token on English prose
/// and code, so dividing by 3 over-estimates by roughly a third, the safe side for a budget
/// reservation and for the max_input_tokens check. It can under-estimate text whose tokens are
/// shorter than 3 bytes (random identifiers, some emoji and rare CJK characters); the
/// reservation is settled with the reported usage anyway. Chat framing (a few tokens per
/// message) is the caller's to add.
std::int64_t estimateTokens(std::string_view text);

}  // namespace assay::llm
