#include "judges/judge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <xxhash.h>

#include <cctype>
#include <cmath>
#include <sstream>
#include <type_traits>
#include <variant>

#include "core/bounded_file.hpp"

namespace assay {

std::string_view judgeKindName(JudgeKind k) {
  switch (k) {
    case JudgeKind::kCheck:
      return "check";
    case JudgeKind::kLexical:
      return "lexical";
    case JudgeKind::kRetrieval:
      return "retrieval";
    case JudgeKind::kLlm:
      return "llm";
  }
  return "unknown";
}

std::int64_t JudgeOptionValues::getInt(std::string_view name, std::int64_t dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected an integer");
}

double JudgeOptionValues::getNumber(std::string_view name, double dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<double>(&it->second)) return *v;
  if (auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  throw OptionError(std::string(name), "expected a number");
}

bool JudgeOptionValues::getBool(std::string_view name, bool dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<bool>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected true or false");
}

std::string JudgeOptionValues::getString(std::string_view name, std::string dflt) const {
  auto it = values_.find(name);
  if (it == values_.end()) return dflt;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected a string");
}

std::vector<std::string> JudgeOptionValues::getStringList(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return {};
  if (auto* v = std::get_if<std::vector<std::string>>(&it->second)) return *v;
  throw OptionError(std::string(name), "expected a list of strings");
}

const OptionTree* JudgeOptionValues::getTree(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return nullptr;
  if (auto* v = std::get_if<OptionTree>(&it->second)) return v;
  throw OptionError(std::string(name), "expected a mapping or a list");
}

namespace {

template <typename T>
T checkedRange(std::string_view name, T v, T lo, T hi) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      std::ostringstream m;
      m << "must be a finite number between " << lo << " and " << hi;
      throw OptionError(std::string(name), m.str());
    }
  }
  if (v < lo || v > hi) {
    std::ostringstream m;
    m << "must be between " << lo << " and " << hi;
    throw OptionError(std::string(name), m.str());
  }
  return v;
}

}  // namespace

std::int64_t JudgeOptionValues::getIntIn(std::string_view name, std::int64_t dflt, std::int64_t lo,
                                         std::int64_t hi) const {
  return checkedRange(name, getInt(name, dflt), lo, hi);
}

double JudgeOptionValues::getNumberIn(std::string_view name, double dflt, double lo,
                                      double hi) const {
  return checkedRange(name, getNumber(name, dflt), lo, hi);
}

const OptionTree* OptionTree::find(std::string_view key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& e : map)
    if (e.key == key) return &e.value;
  return nullptr;
}

JudgeInfo descriptorInfo(const JudgeDescriptor& d) {
  return JudgeInfo{std::string(d.criterion), d.min_score, d.max_score, d.buckets,
                   d.kind != JudgeKind::kCheck};
}

namespace {

/// `tree` as canonical text: scalars quoted, mappings in file order, lists in order.
void canonical(const OptionTree& tree, std::string& out) {
  switch (tree.kind) {
    case OptionTree::Kind::kScalar:
      out += fmt::format("{:?}", tree.scalar);
      return;
    case OptionTree::Kind::kMap:
      out += '{';
      for (const auto& e : tree.map) {
        out += fmt::format("{:?}:", e.key);
        canonical(e.value, out);
        out += ',';
      }
      out += '}';
      return;
    case OptionTree::Kind::kList:
      out += '[';
      for (const auto& v : tree.list) {
        canonical(v, out);
        out += ',';
      }
      out += ']';
      return;
  }
}

/// The host of an http(s) URL ("api.openai.com" of "https://api.openai.com/v1"), lower-cased;
/// the text itself when it is not one.
std::string hostOf(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme != std::string_view::npos) url.remove_prefix(scheme + 3);
  url = url.substr(0, url.find_first_of("/?#"));
  if (const auto at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  std::string host(url);
  for (auto& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return host;
}

}  // namespace

JudgeVersion judgeVersionOf(const JudgeDescriptor& d, const JudgeOptionValues& values) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"type", std::string(d.type)},
      {"kind", std::string(judgeKindName(d.kind))},
      {"template", std::string(d.version_salt)}};
  for (const auto& spec : d.options) {
    if (!spec.scoring) continue;
    const OptionValue* v = values.find(spec.name);
    if (!v) continue;  // the default: part of the type's code, which `template` covers
    std::string text;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>)
            text = fmt::format(
                "{:?}", d.kind == JudgeKind::kLlm && spec.name == "endpoint" ? hostOf(x) : x);
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            text = fmt::format("{}", fmt::join(x, "\x1f"));
          else if constexpr (std::is_same_v<T, OptionTree>)
            canonical(x, text);
          else  // numbers in the shortest form that reads back the same; booleans
            text = fmt::format("{}", x);
        },
        *v);
    if (!spec.default_value.empty() && text == spec.default_value) continue;  // as if omitted
    if (const auto* path = std::get_if<std::string>(v); spec.file_digest && path) {
      JudgeOptionValues::FileRead read;
      const auto* file = values.file(spec.name);
      if (!file) {
        read.error = readRegularFile(*path, JudgeOptionValues::kMaxOptionFileBytes, read.bytes);
        file = &read;
      }
      text += file->error.empty()
                  ? fmt::format("#{:016x}", XXH3_64bits(file->bytes.data(), file->bytes.size()))
                  : "#unreadable";
    }
    fields.emplace_back(std::string(spec.name), std::move(text));
  }
  return JudgeVersion::make(std::move(fields));
}

void JudgeOptionValues::readFiles(std::span<const OptionSpec> options) {
  for (const auto& spec : options) {
    const OptionValue* v = find(spec.name);
    const auto* path = v ? std::get_if<std::string>(v) : nullptr;
    if (!spec.file_digest || !path || path->empty()) continue;
    auto read = std::make_shared<FileRead>();
    read->error = readRegularFile(*path, kMaxOptionFileBytes, read->bytes);
    files_[std::string(spec.name)] = std::move(read);
  }
}

std::string judgeVersion(const JudgeDescriptor& d, const JudgeOptionValues& values) {
  return judgeVersionOf(d, values).id;
}

}  // namespace assay
