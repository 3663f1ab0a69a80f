#include "judges/llm/pricing.hpp"

#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace assay::llm {

double costUsd(const ModelPrice& price, const TokenUsage& usage) {
  const std::int64_t prompt = std::max<std::int64_t>(usage.prompt_tokens, 0);
  const std::int64_t cached = std::clamp<std::int64_t>(usage.cached_prompt_tokens, 0, prompt);
  const std::int64_t write =
      std::clamp<std::int64_t>(usage.cache_write_prompt_tokens, 0, prompt - cached);
  const std::int64_t uncached = prompt - cached - write;
  const std::int64_t completion = std::max<std::int64_t>(usage.completion_tokens, 0);
  const double micro_usd = static_cast<double>(uncached) * price.input_usd_per_mtok +
                           static_cast<double>(cached) * price.cached_input_usd_per_mtok +
                           static_cast<double>(write) * price.cache_write_usd_per_mtok +
                           static_cast<double>(completion) * price.output_usd_per_mtok;
  return micro_usd / 1e6;
}

double costEur(double usd, double usd_to_eur) { return usd * usd_to_eur; }

TokenUsage::Classes TokenUsage::classes() const {
  const std::int64_t prompt = std::max<std::int64_t>(prompt_tokens, 0);
  const std::int64_t cached = std::clamp<std::int64_t>(cached_prompt_tokens, 0, prompt);
  const std::int64_t write =
      std::clamp<std::int64_t>(cache_write_prompt_tokens, 0, prompt - cached);
  const std::int64_t completion = std::max<std::int64_t>(completion_tokens, 0);
  const std::int64_t reasoning = std::clamp<std::int64_t>(reasoning_tokens, 0, completion);
  return {prompt - cached - write, cached, write, completion - reasoning, reasoning};
}

PriceTable PriceTable::builtin() {
  PriceTable t;
  // OpenAI: input / cached input / output / cache write (OpenAI charges no write premium).
  t.set("gpt-4o", {2.50, 1.25, 10.00, 2.50});
  t.set("gpt-4o-2024-05-13", uncachedPrice(5.00, 15.00));  // the first gpt-4o snapshot
  t.set("gpt-4o-mini", {0.15, 0.075, 0.60, 0.15});
  t.set("gpt-4.1", {2.00, 0.50, 8.00, 2.00});
  t.set("gpt-4.1-mini", {0.40, 0.10, 1.60, 0.40});
  t.set("gpt-4.1-nano", {0.10, 0.025, 0.40, 0.10});
  t.set("gpt-5", {1.25, 0.125, 10.00, 1.25});
  t.set("gpt-5-mini", {0.25, 0.025, 2.00, 0.25});
  t.set("gpt-5-nano", {0.05, 0.005, 0.40, 0.05});
  t.set("o3-mini", {1.10, 0.55, 4.40, 1.10});
  t.set("o4-mini", {1.10, 0.275, 4.40, 1.10});
  t.set("o3", {2.00, 0.50, 8.00, 2.00});  // after the June 2025 price cut
  // Anthropic: base input / cache hits (0.1× input) / output / 5-minute cache writes (1.25×).
  t.set("claude-3-haiku", {0.25, 0.03, 1.25, 0.30});
  t.set("claude-3-5-haiku", {0.80, 0.08, 4.00, 1.00});
  t.set("claude-haiku-4-5", {1.00, 0.10, 5.00, 1.25});
  for (const char* sonnet :
       {"claude-3-5-sonnet", "claude-3-7-sonnet", "claude-sonnet-4", "claude-sonnet-4-5"})
    t.set(sonnet, {3.00, 0.30, 15.00, 3.75});
  for (const char* opus : {"claude-3-opus", "claude-opus-4", "claude-opus-4-1"})
    t.set(opus, {15.00, 1.50, 75.00, 18.75});
  t.set("claude-opus-4-5", {5.00, 0.50, 25.00, 6.25});
  // Mistral: no cached-input rate.
  t.set("mistral-small", uncachedPrice(0.10, 0.30));
  t.set("mistral-medium", uncachedPrice(0.40, 2.00));
  t.set("mistral-large", uncachedPrice(2.00, 6.00));
  return t;
}

void PriceTable::set(std::string model, ModelPrice price) {
  prices_.insert_or_assign(std::move(model), price);
}

namespace {

// "-20241022", "-2024-07-18", "@20241022", "-2411", "-latest": a dated snapshot or moving
// alias of the same model. A version of fewer than four digits ("claude-opus-4-5") or a word
// ("-mini", "-pro", "-realtime-preview") names another model.
bool isSnapshotSuffix(std::string_view rest) {
  if (rest.size() < 2 || (rest.front() != '-' && rest.front() != '@')) return false;
  rest.remove_prefix(1);
  if (rest == "latest") return true;
  if (rest.size() < 4) return false;
  return std::all_of(rest.begin(), rest.begin() + 4,
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

std::optional<PriceMatch> PriceTable::match(std::string_view model) const {
  if (const auto it = prices_.find(model); it != prices_.end())
    return PriceMatch{it->first, it->second};
  // Longest base name first: walk the separators from the right.
  for (std::size_t end = model.size(); end > 0; --end) {
    const char c = model[end - 1];
    if (c != '-' && c != '@') continue;
    const std::string_view base = model.substr(0, end - 1);
    if (!isSnapshotSuffix(model.substr(end - 1))) continue;
    if (const auto it = prices_.find(base); it != prices_.end())
      return PriceMatch{it->first, it->second};
  }
  return std::nullopt;
}

std::optional<ModelPrice> PriceTable::find(std::string_view model) const {
  if (auto m = match(model)) return m->price;
  return std::nullopt;
}

namespace {

// A token count larger than this is not a usage report but garbage (the largest context
// windows sold are 10 M tokens, Meta's Llama 4 Scout; assay's own requests are bounded by
// max_input_tokens and max_tokens): such a usage is unreadable, counted as usage_missing and
// the call charged its estimate. At the dearest listed price ($600 per M output tokens, OpenAI
// o1-pro) it also keeps one call's cost far below the ledger's 1e6 € (budget.hpp).
constexpr std::int64_t kMaxTokenCount = 100'000'000;

enum class Count { kOk, kAbsent, kBad };

// Reads `object[name]` as a token count. Absent and null are told apart from malformed values
// (strings, fractions, negatives), which make the whole usage unreadable.
Count readCount(const rapidjson::Value& object, const char* name, std::int64_t& out) {
  const auto it = object.FindMember(name);
  if (it == object.MemberEnd() || it->value.IsNull()) return Count::kAbsent;
  if (!it->value.IsInt64()) return Count::kBad;
  const std::int64_t v = it->value.GetInt64();
  if (v < 0 || v > kMaxTokenCount) return Count::kBad;
  out = v;
  return Count::kOk;
}

const rapidjson::Value* usageObject(const rapidjson::Value& response) {
  if (!response.IsObject()) return nullptr;
  const auto it = response.FindMember("usage");
  if (it == response.MemberEnd() || !it->value.IsObject()) return nullptr;
  return &it->value;
}

}  // namespace

std::optional<TokenUsage> parseOpenAiUsage(const rapidjson::Value& response) {
  const rapidjson::Value* usage = usageObject(response);
  if (usage == nullptr) return std::nullopt;
  TokenUsage u;
  if (readCount(*usage, "prompt_tokens", u.prompt_tokens) != Count::kOk ||
      readCount(*usage, "completion_tokens", u.completion_tokens) != Count::kOk)
    return std::nullopt;
  // A details object may be missing or null; a count in it may be missing or null (= 0).
  const auto detail = [&](const char* object, const char* name, std::int64_t& out) {
    const auto it = usage->FindMember(object);
    if (it == usage->MemberEnd() || it->value.IsNull()) return true;
    return it->value.IsObject() && readCount(it->value, name, out) != Count::kBad;
  };
  if (!detail("prompt_tokens_details", "cached_tokens", u.cached_prompt_tokens) ||
      !detail("completion_tokens_details", "reasoning_tokens", u.reasoning_tokens) ||
      readCount(*usage, "cache_creation_input_tokens", u.cache_write_prompt_tokens) == Count::kBad)
    return std::nullopt;
  if (u.cached_prompt_tokens + u.cache_write_prompt_tokens > u.prompt_tokens ||
      u.reasoning_tokens > u.completion_tokens)
    return std::nullopt;
  return u;
}

std::optional<TokenUsage> parseAnthropicUsage(const rapidjson::Value& response) {
  const rapidjson::Value* usage = usageObject(response);
  if (usage == nullptr) return std::nullopt;
  std::int64_t input = 0, output = 0, cache_read = 0, cache_creation = 0;
  if (readCount(*usage, "input_tokens", input) != Count::kOk ||
      readCount(*usage, "output_tokens", output) != Count::kOk ||
      readCount(*usage, "cache_read_input_tokens", cache_read) == Count::kBad ||
      readCount(*usage, "cache_creation_input_tokens", cache_creation) == Count::kBad)
    return std::nullopt;
  TokenUsage u;
  u.prompt_tokens = input + cache_read + cache_creation;
  u.cached_prompt_tokens = cache_read;
  u.cache_write_prompt_tokens = cache_creation;
  u.completion_tokens = output;
  return u;
}

TokenUsage estimateUsage(std::int64_t prompt_tokens_estimate, std::int64_t max_tokens) {
  TokenUsage u;
  u.prompt_tokens = std::max<std::int64_t>(prompt_tokens_estimate, 0);
  u.completion_tokens = std::max<std::int64_t>(max_tokens, 0);
  u.reported = false;
  return u;
}

std::int64_t estimateTokens(std::string_view text) {
  return static_cast<std::int64_t>((text.size() + 2) / 3);
}

}  // namespace assay::llm
