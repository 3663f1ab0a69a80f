#include "cli/bakeoff/config.hpp"

#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/bounded_file.hpp"
#include "core/json_limits.hpp"
#include "core/yaml_load.hpp"
#include "core/yaml_reader.hpp"
#include "judges/llm/llm_judge.hpp"

namespace assay::bakeoff {
namespace {

namespace fs = std::filesystem;

const std::set<std::string> kTopKeys = {"name", "inputs",      "criteria",
                                        "arms", "judges",      "passes",
                                        "seed", "concurrency", "exclude_biased"};
const std::set<std::string> kEndpointKeys = {"provider", "endpoint",   "model",  "api_key_env",
                                             "ca_file",  "max_tokens", "timeout"};
const std::set<std::string> kStepKeys = {"system", "template", "temperature"};

/// The bakeoff file's reader: core/yaml_reader.hpp's, with the bakeoff's checks.
class Reader : public YamlReader {
 public:
  Reader(BakeoffLoad& out, std::string base_dir)
      : YamlReader(out.config.file, out.errors, out.warnings),
        out_(out),
        base_(std::move(base_dir)) {}

  void error(const YAML::Node& n, const std::string& path, const std::string& message) {
    YamlReader::error(markOf(n), path, message);
  }
  void warn(const YAML::Node& n, const std::string& path, const std::string& message) {
    addWarning(markOf(n), path, message);
  }
  static YAML::Mark markOf(const YAML::Node& n) {
    return n.IsDefined() ? n.Mark() : YAML::Mark::null_mark();
  }

  /// Unknown keys of map `n`, with the nearest known one.
  void keys(const YAML::Node& n, const std::string& path, const std::set<std::string>& known) {
    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>();
      if (known.count(key)) continue;
      const std::string best = nearestKey(key, known);
      error(kv.first, join(path, key),
            "unknown key" + (best.empty() ? std::string() : " (did you mean '" + best + "'?)"));
    }
  }

  bool str(const YAML::Node& n, const char* key, const std::string& path, std::string& out) {
    const auto v = n[key];
    if (!v) return false;
    if (!v.IsScalar()) {
      error(v, join(path, key), "expected a string");
      return false;
    }
    out = v.as<std::string>();
    return true;
  }

  template <typename T>
  bool number(const YAML::Node& n, const char* key, const std::string& path, T& out, T lo, T hi) {
    const auto v = n[key];
    if (!v) return false;
    T value{};
    if (!v.IsScalar() || !YAML::convert<T>::decode(v, value) || value < lo || value > hi) {
      std::ostringstream range;
      range << "expected a number from " << lo << " to " << hi;
      error(v, join(path, key), range.str());
      return false;
    }
    out = value;
    return true;
  }

  std::string resolve(const std::string& p) const {
    return p.empty() || fs::path(p).is_absolute() ? p : (fs::path(base_) / p).string();
  }

  void endpoint(const YAML::Node& n, const std::string& path, Endpoint& e) {
    std::string provider;
    if (str(n, "provider", path, provider)) {
      if (provider == "openai")
        e.provider = llm::Provider::kOpenAi;
      else if (provider == "anthropic")
        e.provider = llm::Provider::kAnthropic;
      else
        error(n["provider"], join(path, "provider"), "expected openai or anthropic");
    }
    str(n, "endpoint", path, e.endpoint);
    str(n, "model", path, e.model);
    if (str(n, "api_key_env", path, e.api_key_env) && !validVariable(e.api_key_env))
      // Never echoed: a key pasted here instead of a variable's name must not reach a log.
      error(n["api_key_env"], join(path, "api_key_env"),
            "expected the NAME of an environment variable ([A-Za-z_][A-Za-z0-9_]*), not a key "
            "(the value is not shown)");
    if (str(n, "ca_file", path, e.ca_file)) e.ca_file = resolve(e.ca_file);
    number(n, "max_tokens", path, e.max_tokens, 1, 100000);
    number(n, "timeout", path, e.timeout_s, 1.0, 3600.0);
    const auto where = at(markOf(n), path, "");
    e.where = where.format();
    e.where.resize(e.where.size() - 2);  // without the ": " of the empty message
  }

  static bool validVariable(const std::string& name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
  }

  void checkEndpoint(const YAML::Node& n, const std::string& path, const Endpoint& e) {
    if (e.endpoint.rfind("http://", 0) != 0 && e.endpoint.rfind("https://", 0) != 0)
      error(n["endpoint"] ? n["endpoint"] : n, join(path, "endpoint"),
            e.endpoint.empty() ? "required (e.g. https://api.openai.com/v1)"
                               : "'" + e.endpoint + "': expected an http:// or https:// URL");
    if (e.model.empty()) error(n, join(path, "model"), "required");
  }

  void step(const YAML::Node& n, const std::string& path, Step& s, bool first) {
    str(n, "system", path, s.system);
    str(n, "template", path, s.prompt);
    number(n, "temperature", path, s.temperature, 0.0, 2.0);
    if (s.prompt.empty()) error(n, join(path, "template"), "required (e.g. \"{{question}}\")");
    checkPlaceholders(n["template"], join(path, "template"), s.prompt, first);
  }

  void checkPlaceholders(const YAML::Node& n, const std::string& path, const std::string& t,
                         bool first) {
    static const std::set<std::string> kNames = {"question", "contexts", "id", "previous"};
    for (std::size_t at = t.find("{{"); at != std::string::npos; at = t.find("{{", at + 2)) {
      const auto end = t.find("}}", at);
      if (end == std::string::npos) {
        error(n, path, "'" + t.substr(at, 20) + "': a placeholder opened with {{ is not closed");
        return;
      }
      const std::string name = t.substr(at + 2, end - at - 2);
      if (!kNames.count(name))
        error(n, path,
              "unknown placeholder {{" + name + "}}: expected {{question}}, {{contexts}}, " +
                  "{{id}} or {{previous}}");
      if (name == "previous" && first)
        error(n, path,
              "{{previous}} is the previous step's output, and this is the first step (or a "
              "single live call): nothing comes before it");
    }
    for (const auto& name : kNames)  // {question}: a single brace is sent as it is
      if (const auto at = t.find("{" + name + "}");
          at != std::string::npos && (at == 0 || t[at - 1] != '{'))
        warn(n, path,
             "'{" + name + "}' is sent to the model as written: did you mean {{" + name + "}}?");
    if (first && t.find("{{question}}") == std::string::npos)
      warn(n, path,
           "the first step's template has no {{question}}: the model never sees the "
           "input's question");
  }

  void arm(const YAML::Node& n, const std::string& path, Arm& a) {
    if (!n.IsMap()) {
      error(n, path, "expected a map with name and recorded, template or steps");
      return;
    }
    std::set<std::string> known = {"name", "recorded", "field", "steps"};
    known.insert(kEndpointKeys.begin(), kEndpointKeys.end());
    known.insert(kStepKeys.begin(), kStepKeys.end());
    keys(n, path, known);
    str(n, "name", path, a.name);
    if (a.name.empty()) error(n, join(path, "name"), "required");
    const bool recorded = str(n, "recorded", path, a.recorded_file);
    const bool single = static_cast<bool>(n["template"]);
    const bool workflow = static_cast<bool>(n["steps"]);
    if (recorded + single + workflow != 1) {
      error(n, path,
            "give exactly one of recorded (a file of outputs), template (one live "
            "call) or steps (a workflow)");
      return;
    }
    if (recorded) {
      a.recorded_file = resolve(a.recorded_file);
      str(n, "field", path, a.recorded_field);
      str(n, "model", path, a.model);
      if (a.recorded_field.empty() || a.recorded_field.front() != '/')
        error(n["field"], join(path, "field"), "expected a JSON Pointer such as /output");
      return;
    }
    Endpoint defaults;
    endpoint(n, path, defaults);
    a.model = defaults.model;
    if (single) {
      Step s;
      s.at = defaults;
      step(n, path, s, true);
      checkEndpoint(n, path, s.at);
      a.steps.push_back(std::move(s));
      return;
    }
    const auto steps = n["steps"];
    if (!steps.IsSequence() || steps.size() == 0 || steps.size() > 5) {
      error(steps, join(path, "steps"), "expected a list of 1 to 5 steps");
      return;
    }
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string p = join(path, "steps") + "[" + std::to_string(i) + "]";
      std::set<std::string> step_keys = kStepKeys;
      step_keys.insert(kEndpointKeys.begin(), kEndpointKeys.end());
      keys(steps[i], p, step_keys);
      Step s;
      s.at = defaults;
      endpoint(steps[i], p, s.at);
      step(steps[i], p, s, i == 0);
      checkEndpoint(steps[i], p, s.at);
      a.steps.push_back(std::move(s));
    }
  }

  void inputs(const YAML::Node& n) {
    auto& c = out_.config;
    if (!n) {
      error(n, "inputs", "required: {file: EVENTS.jsonl, limit: N} or a list of inputs");
      return;
    }
    if (n.IsSequence()) {
      for (std::size_t i = 0; i < n.size(); ++i) {
        const std::string p = "inputs[" + std::to_string(i) + "]";
        keys(n[i], p, {"id", "question", "contexts"});
        Event e;
        str(n[i], "id", p, e.id);
        str(n[i], "question", p, e.question);
        if (e.id.empty() || e.question.empty()) error(n[i], p, "id and question are required");
        if (const auto ctx = n[i]["contexts"]; ctx && ctx.IsSequence())
          for (const auto& t : ctx) e.contexts.push_back(Context{"", t.as<std::string>(), ""});
        c.inputs.push_back(std::move(e));
      }
      return;
    }
    keys(n, "inputs", {"file", "limit"});
    std::size_t limit = kMaxInputs;  // the first 10 lines unless told
    number(n, "limit", "inputs", limit, std::size_t{1}, kMaxInputs);
    if (!str(n, "file", "inputs", c.inputs_file)) {
      error(n, "inputs.file", "required");
      return;
    }
    c.inputs_file = resolve(c.inputs_file);
    readInputs(n["file"], limit);
  }

  void readInputs(const YAML::Node& n, std::size_t limit) {
    auto& c = out_.config;
    // A regular file of bounded size: a FIFO or a device would block or never end.
    std::string content;
    if (const auto why = readRegularFile(c.inputs_file, kMaxDataFileBytes, content); !why.empty()) {
      error(n, "inputs.file", c.inputs_file + " " + why);
      return;
    }
    std::istringstream in(std::move(content));
    std::string line;
    for (int no = 1; c.inputs.size() < limit && std::getline(in, line); ++no) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = c.inputs_file + ":" + std::to_string(no);
      rapidjson::Document d;
      if (!jsonShapeProblem(line)) d.Parse(line.c_str(), line.size());
      if (d.HasParseError() || !d.IsObject() || !d.HasMember("id") || !d["id"].IsString() ||
          !d.HasMember("question") || !d["question"].IsString()) {
        error(n, "inputs.file", where + ": expected a JSON object with a string id and question");
        return;
      }
      Event e;
      e.id = d["id"].GetString();
      e.question = d["question"].GetString();
      if (d.HasMember("contexts") && d["contexts"].IsArray())
        for (const auto& ctx : d["contexts"].GetArray()) {
          if (ctx.IsString()) e.contexts.push_back(Context{"", ctx.GetString(), ""});
          if (ctx.IsObject() && ctx.HasMember("text") && ctx["text"].IsString())
            e.contexts.push_back(Context{"", ctx["text"].GetString(), ""});
        }
      c.inputs.push_back(std::move(e));
    }
  }

  void criteria(const YAML::Node& n) {
    auto& c = out_.config;
    if (!n) {
      c.criteria = defaultCriteria();
      return;
    }
    if (!n.IsSequence()) {
      error(n, "criteria", "expected a list of {name, description, weight}");
      return;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string p = "criteria[" + std::to_string(i) + "]";
      keys(n[i], p, {"name", "description", "weight"});
      Criterion cr;
      str(n[i], "name", p, cr.name);
      str(n[i], "description", p, cr.description);
      number(n[i], "weight", p, cr.weight, -1e9, 1e9);
      for (const auto& known : defaultCriteria())
        if (cr.description.empty() && known.name == cr.name) cr.description = known.description;
      if (cr.description.empty()) error(n[i], join(p, "description"), "required");
      c.criteria.push_back(std::move(cr));
    }
    if (const auto why = criteriaProblem(c.criteria); !why.empty()) error(n, "criteria", why);
  }

  void judges(const YAML::Node& n) {
    if (!n || !n.IsSequence()) {
      error(n, "judges", "required: a list of 2 or 3 judges");
      return;
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string p = "judges[" + std::to_string(i) + "]";
      std::set<std::string> known = kEndpointKeys;
      known.insert("name");
      keys(n[i], p, known);
      Judge j;
      j.at.max_tokens = 1500;
      str(n[i], "name", p, j.name);
      endpoint(n[i], p, j.at);
      checkEndpoint(n[i], p, j.at);
      if (j.name.empty()) j.name = j.at.model;
      out_.config.judges.push_back(std::move(j));
    }
  }

  void read(const YAML::Node& root) {
    auto& c = out_.config;
    if (!root.IsMap()) {
      error(root, "", "expected a map with inputs, arms and judges");
      return;
    }
    keys(root, "", kTopKeys);
    str(root, "name", "", c.name);
    number(root, "passes", "", c.passes, 1, 2);
    if (const auto v = root["exclude_biased"]) {
      if (!v.IsScalar() || !YAML::convert<bool>::decode(v, c.exclude_biased))
        error(v, "exclude_biased", "expected true or false");
    }
    number(root, "concurrency", "", c.concurrency, 1, 32);
    if (std::uint64_t seed = 0; number(root, "seed", "", seed, std::uint64_t{0}, UINT64_MAX))
      c.seed = seed;
    inputs(root["inputs"]);
    criteria(root["criteria"]);
    const auto arms = root["arms"];
    if (!arms || !arms.IsSequence()) {
      error(arms, "arms", "required: a list of 2 to 8 arms");
    } else {
      std::set<std::string> names;
      for (std::size_t i = 0; i < arms.size(); ++i) {
        Arm a;
        arm(arms[i], "arms[" + std::to_string(i) + "]", a);
        if (!a.name.empty() && !names.insert(a.name).second)
          error(arms[i]["name"], "arms[" + std::to_string(i) + "].name",
                "'" + a.name + "' is already an arm's name");
        c.arms.push_back(std::move(a));
      }
    }
    judges(root["judges"]);
    sizes(root);
    families(root);
    recorded(arms);
  }

  /// The limits (sizeProblem), each at the key it is about.
  void sizes(const YAML::Node& root) {
    const auto& c = out_.config;
    const std::size_t arms = c.arms.size(), inputs = c.inputs.size();
    const bool arms_ok = arms >= kMinArms && arms <= kMaxArms;
    const bool inputs_ok = inputs >= 1 && inputs <= kMaxInputs;
    if (!arms_ok && root["arms"]) error(root["arms"], "arms", sizeProblem(arms, 1, 2, 1));
    if (!inputs_ok && root["inputs"]) error(root["inputs"], "inputs", sizeProblem(2, inputs, 2, 1));
    if (arms_ok && inputs_ok)
      if (const auto why = sizeProblem(arms, inputs, 2, 1); !why.empty())
        error(root["arms"], "arms", why);
    if (root["judges"] && root["judges"].IsSequence())
      if (const auto why = sizeProblem(2, 1, c.judges.size(), 1); !why.empty())
        error(root["judges"], "judges", why);
  }

  /// A judge of the same model family as an arm's generator favours it (llm_judge.hpp): one
  /// warning per judge, naming the arms.
  void families(const YAML::Node& root) {
    const auto& c = out_.config;
    for (std::size_t j = 0; j < c.judges.size(); ++j) {
      const std::string family = llm::modelFamily(c.judges[j].at.model);
      std::string arms;
      for (const auto& a : c.arms) {
        bool same = !a.model.empty() && llm::modelFamily(a.model) == family;
        for (const auto& s : a.steps) same = same || llm::modelFamily(s.at.model) == family;
        if (same) arms += (arms.empty() ? "'" : ", '") + a.name + "'";
      }
      if (!arms.empty())
        warn(root["judges"][j], "judges[" + std::to_string(j) + "]",
             "judge '" + c.judges[j].name + "' (" + c.judges[j].at.model +
                 ") shares the model family '" + family + "' of the generator of " + arms +
                 ": judges favour their own family's outputs");
    }
  }

  void recorded(const YAML::Node& arms) {
    auto& c = out_.config;
    if (!out_.errors.empty()) return;
    for (std::size_t i = 0; i < c.arms.size(); ++i) {
      if (c.arms[i].live()) continue;
      try {
        readRecorded(c.arms[i], c.inputs);
      } catch (const std::exception& e) {
        error(arms[i]["recorded"], "arms[" + std::to_string(i) + "].recorded", e.what());
      }
    }
  }

 private:
  BakeoffLoad& out_;
  std::string base_;
};

}  // namespace

BakeoffLoad loadBakeoffString(const std::string& yaml, const std::string& file,
                              const std::string& base_dir) {
  BakeoffLoad out;
  out.config.file = file;
  out.config.name = fs::path(file).stem().string();
  Reader r(out, base_dir);
  YAML::Node root;
  if (const auto problem = loadYaml(yaml, root)) {
    out.errors.push_back(ConfigError{file, problem->line, problem->column, "", problem->message});
    return out;
  }
  try {
    r.read(root);
  } catch (const YAML::Exception& e) {
    out.errors.push_back(ConfigError{file, e.mark.is_null() ? 0 : e.mark.line + 1,
                                     e.mark.is_null() ? 0 : e.mark.column + 1, "", e.msg});
  }
  return out;
}

BakeoffLoad loadBakeoff(const std::string& path) {
  std::string text;
  if (auto problem = readYamlFile(path, text)) {
    BakeoffLoad out;
    out.errors.push_back(ConfigError{path, 0, 0, "", std::move(problem->message)});
    return out;
  }
  return loadBakeoffString(text, path, fs::path(path).parent_path().string());
}

std::string render(const std::string& tmpl, const Event& input, const std::string& previous) {
  std::string contexts;
  for (std::size_t i = 0; i < input.contexts.size(); ++i)
    contexts += (i ? "\n\n[" : "[") + std::to_string(i + 1) + "] " + input.contexts[i].text;
  const std::map<std::string, const std::string*> values = {{"question", &input.question},
                                                            {"contexts", &contexts},
                                                            {"id", &input.id},
                                                            {"previous", &previous}};
  std::string out;
  std::size_t from = 0;
  for (std::size_t at; (at = tmpl.find("{{", from)) != std::string::npos;) {
    const auto end = tmpl.find("}}", at);
    if (end == std::string::npos) break;
    const auto v = values.find(tmpl.substr(at + 2, end - at - 2));
    out.append(tmpl, from, at - from);
    if (v == values.end())
      out.append(tmpl, at, end + 2 - at);
    else
      out += *v->second;
    from = end + 2;
  }
  out.append(tmpl, from);
  return out;
}

std::vector<std::string> readRecorded(const Arm& arm, const std::vector<Event>& inputs) {
  std::string content;
  if (const auto why = readRegularFile(arm.recorded_file, kMaxDataFileBytes, content); !why.empty())
    throw std::runtime_error(arm.recorded_file + " " + why);
  std::istringstream in(std::move(content));
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < inputs.size(); ++i) index.emplace(inputs[i].id, i);
  std::vector<std::optional<std::string>> found(inputs.size());
  const rapidjson::Pointer field(arm.recorded_field.c_str());
  if (!field.IsValid()) throw std::runtime_error("field " + arm.recorded_field + ": not a pointer");
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = arm.recorded_file + ":" + std::to_string(no);
    rapidjson::Document d;
    if (jsonShapeProblem(line) || d.Parse(line.c_str(), line.size()).HasParseError() ||
        !d.IsObject() || !d.HasMember("id") || !d["id"].IsString())
      throw std::runtime_error(where + ": expected a JSON object with a string id");
    const auto at = index.find(d["id"].GetString());
    if (at == index.end()) continue;
    const auto* v = field.Get(d);
    if (!v || !v->IsString())
      throw std::runtime_error(where + ": no string at " + arm.recorded_field + " for id '" +
                               at->first + "'");
    found[at->second] = std::string(v->GetString(), v->GetStringLength());
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!found[i])
      throw std::runtime_error(arm.recorded_file + ": no output for input '" + inputs[i].id + "'");
    out.push_back(std::move(*found[i]));
  }
  return out;
}

}  // namespace assay::bakeoff
