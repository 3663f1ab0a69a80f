#include "config/reload.hpp"

#include <yaml-cpp/yaml.h>

#include <set>

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
YAML::Node without(const YAML::Node& map, const char* key) {
  if (!map.IsDefined() || !map.IsMap()) return map;
  YAML::Node copy(YAML::NodeType::Map);
  for (const auto& kv : map)
    if (kv.first.as<std::string>("") != key) copy[kv.first] = kv.second;
  return copy;
}

void diffJudges(const YAML::Node& a, const YAML::Node& b, ReloadDiff& d) {
  if (same(a, b)) return;
  if (!a.IsSequence() || !b.IsSequence() || a.size() != b.size()) {
    d.judges = true;
    d.changed_judges.push_back("judges (added, removed or reordered)");
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (same(a[i], b[i])) continue;
    if (a[i].IsMap() && b[i].IsMap() && same(without(a[i], "rate"), without(b[i], "rate"))) {
      d.judge_rates.push_back(i);
      continue;
    }
    d.judges = true;
    d.changed_judges.push_back("judges[" + std::to_string(i) + "] '" +
                               b[i]["name"].as<std::string>("?") + "'");
  }
}

}  // namespace

ReloadDiff diffConfigs(const std::string& running_yaml, const std::string& new_yaml) {
  ReloadDiff d;
  YAML::Node loaded_a, loaded_b;
  try {
    loaded_a = YAML::Load(running_yaml);
    loaded_b = YAML::Load(new_yaml);
  } catch (const YAML::Exception&) {
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
    else if (s == "budget" && same(without(x, "daily_limit_eur"), without(y, "daily_limit_eur")))
      d.budget_cap = true;
    else
      d.restart.push_back(s);
  }
  return d;
}

}  // namespace assay
