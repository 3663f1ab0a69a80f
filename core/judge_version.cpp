#include "core/judge_version.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>

namespace assay {

JudgeVersion JudgeVersion::make(std::vector<std::pair<std::string, std::string>> fields) {
  JudgeVersion v;
  std::string text;
  for (const auto& [name, value] : fields) {
    text += name;
    text += '=';
    text += value;
    text += ';';
    v.digests.emplace_back(name,
                           fmt::format("{:04x}", XXH3_64bits(value.data(), value.size()) >> 48));
  }
  v.id = fmt::format("{:012x}", XXH3_64bits(text.data(), text.size()) >> 16);
  v.fields = std::move(fields);
  return v;
}

std::vector<std::string> changedFields(const std::vector<std::pair<std::string, std::string>>& from,
                                       const std::vector<std::pair<std::string, std::string>>& to) {
  const auto find = [](const auto& list, const std::string& name) {
    return std::find_if(list.begin(), list.end(), [&](const auto& f) { return f.first == name; });
  };
  std::vector<std::string> out;
  for (const auto& [name, value] : to) {
    const auto it = find(from, name);
    if (it == from.end() || it->second != value) out.push_back(name);
  }
  for (const auto& [name, value] : from)
    if (find(to, name) == to.end()) out.push_back(name);
  return out;
}

}  // namespace assay
