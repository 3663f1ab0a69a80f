#include "config/reload.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/yaml_load.hpp"

namespace assay {
namespace {

/// Structural equality of two YAML values (scalars as text, maps by key, sequences in order; an
/// empty map is as good as none).
bool absent(const YAML::Node& n) {
  return !n.IsDefined() || n.IsNull() || (n.IsMap() && n.size() == 0);
}

bool same(const YAML::Node& a, const YAML::Node& b) {
  if (absent(a) || absent(b)) return absent(a) && absent(b);  // an empty section: the defaults
  if (a.Type() != b.Type()) return false;
  if (a.IsScalar()) return a.Scalar() == b.Scalar();
  if (a.IsSequence()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  }
  if (a.size() != b.size()) return false;
  for (const auto& kv : a) {
    const auto key = kv.first.as<std::string>("");
    const YAML::Node other = b[key];
    if (!other.IsDefined() || !same(kv.second, other)) return false;
  }
  return true;
}

/// A map without one key.
YAML::Node without(const YAML::Node& map, std::initializer_list<const char*> keys) {
  if (!map.IsDefined() || !map.IsMap()) return map;
  YAML::Node copy(YAML::NodeType::Map);
  for (const auto& kv : map) {
    const std::string k = kv.first.as<std::string>("");
    if (std::none_of(keys.begin(), keys.end(), [&](const char* key) { return k == key; }))
      copy[kv.first] = kv.second;
  }
  return copy;
}

std::string judgeName(const YAML::Node& judge) {
  return judge.IsMap() ? judge["name"].as<std::string>("?") : "?";
}

/// Judges compared by name: only rates differ (same judges, same order) → judge_rates; else
/// d.judges, with what changed in words ("added 'x'", "removed 'y'", "changed 'z'",
/// "reordered").
void diffJudges(const YAML::Node& a, const YAML::Node& b, ReloadDiff& d) {
  if (same(a, b)) return;
  d.judges = true;
  if (!a.IsSequence() || !b.IsSequence()) {
    d.changed_judges.push_back("judges");
    return;
  }
  std::vector<std::string> names_a, names_b;
  std::map<std::string, YAML::Node> by_name_a;
  for (std::size_t i = 0; i < a.size(); ++i) {
    names_a.push_back(judgeName(a[i]));
    by_name_a.emplace(names_a.back(), a[i]);
  }
  for (std::size_t i = 0; i < b.size(); ++i) names_b.push_back(judgeName(b[i]));
  if (names_a == names_b) {
    std::vector<std::size_t> rates;
    bool only_rates = true;
    for (std::size_t i = 0; i < a.size() && only_rates; ++i) {
      if (same(a[i], b[i])) continue;
      only_rates =
          a[i].IsMap() && b[i].IsMap() && same(without(a[i], {"rate"}), without(b[i], {"rate"}));
      rates.push_back(i);
    }
    if (only_rates) {
      d.judges = false;
      d.judge_rates = std::move(rates);
      return;
    }
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    const auto it = by_name_a.find(names_b[i]);
    if (it == by_name_a.end())
      d.changed_judges.push_back("added '" + names_b[i] + "'");
    else if (!same(it->second, b[i]))
      d.changed_judges.push_back("changed '" + names_b[i] + "'");
  }
  for (const auto& n : names_a)
    if (std::find(names_b.begin(), names_b.end(), n) == names_b.end())
      d.changed_judges.push_back("removed '" + n + "'");
  if (d.changed_judges.empty()) d.changed_judges.push_back("reordered");
}

}  // namespace

ReloadDiff diffConfigs(const std::string& running_yaml, const std::string& new_yaml) {
  ReloadDiff d;
  YAML::Node loaded_a, loaded_b;
  if (loadYaml(running_yaml, loaded_a) || loadYaml(new_yaml, loaded_b)) {
    d.restart.push_back("the whole file");
    return d;
  }
  const YAML::Node& a = loaded_a;  // const: looking a key up never inserts it
  const YAML::Node& b = loaded_b;
  std::set<std::string> sections;
  for (const YAML::Node* root : {&a, &b})
    if (root->IsMap())
      for (const auto& kv : *root) sections.insert(kv.first.as<std::string>(""));
  for (const auto& s : sections) {
    const YAML::Node x = a.IsMap() ? a[s] : YAML::Node(), y = b.IsMap() ? b[s] : YAML::Node();
    if (same(x, y)) continue;
    if (s == "sampling")
      d.sampling = true;
    else if (s == "log")
      d.log = true;
    else if (s == "judges")
      diffJudges(x, y, d);
    else if (s == "budget" && same(without(x, {"daily_limit_eur", "tenants", "apps"}),
                                   without(y, {"daily_limit_eur", "tenants", "apps"})))  // caps
      d.budget_cap = true;
    else
      d.restart.push_back(s);
  }
  return d;
}

}  // namespace assay
