#include "config/loader.hpp"

#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <rapidjson/pointer.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/edit_distance.hpp"
#include "core/rfc3339.hpp"
#include "core/utf8.hpp"
#include "core/yaml_load.hpp"
#include "judges/llm/budget.hpp"
#include "judges/secrets.hpp"
#include "judges/user_regex.hpp"

namespace assay {
namespace {

/// A drift window: "200" → (200 scores, 0 s); "6h" → (0, 21600 s). Units s, m, h, d; counts
/// 10..1000000, durations 1 min..90 days. nullopt when malformed or out of range.
std::optional<std::pair<int, double>> parseWindow(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    if (text.size() > 7) return std::nullopt;
    const int n = std::stoi(text);
    if (n < 10 || n > 1'000'000) return std::nullopt;
    return std::pair{n, 0.0};
  }
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used + 1 != text.size() || !(value > 0)) return std::nullopt;
  static const std::map<char, double> kUnits = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  const auto unit = kUnits.find(text.back());
  if (unit == kUnits.end()) return std::nullopt;
  const double seconds = value * unit->second;
  if (seconds < 60 || seconds > 90 * 86400.0) return std::nullopt;
  return std::pair{0, seconds};
}

/// A number as a user would write it: 0.05, 5, 0.333333.
std::string formatNumber(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

/// A Kafka topic name as the broker accepts it: 1 to 249 characters of ASCII letters, digits,
/// '.', '_' and '-', and neither "." nor ".." (Apache Kafka, Topic.validate). "" when valid.
std::string kafkaTopicProblem(const std::string& topic) {
  if (topic.empty()) return "must not be empty";
  if (topic.size() > 249) return "longer than 249 characters (Kafka's limit for a topic name)";
  if (topic == "." || topic == "..") return "'.' and '..' are not topic names";
  for (const char c : topic)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return "a topic name holds only ASCII letters, digits, '.', '_' and '-'";
  return "";
}

/// kafka.brokers: "embedded", or comma-separated HOST[:PORT] entries, each optionally prefixed
/// by one of the security protocols librdkafka accepts there (plaintext://, ssl://,
/// sasl_plaintext://, sasl_ssl://); PORT from 1 to 65535. librdkafka itself only logs a bad
/// entry and then waits forever for a broker ("No brokers configured"). "" when valid. A
/// message names the entry by its number and quotes its host at most: a password pasted in
/// the list must not reach a log.
std::string brokersProblem(const std::string& brokers) {
  if (brokers == "embedded" || brokers.empty()) return "";
  if (brokers.find('@') != std::string::npos)  // not quoted: it would show the password
    return "an entry holds '@': credentials do not go in kafka.brokers (set sasl.username and "
           "sasl.password through kafka.secret_files or kafka.secret_env)";
  if (brokers.find(';') != std::string::npos)
    return "entries are separated by commas, not ';' (\"kafka-1:9092,kafka-2:9092\")";
  if (brokers.find(':') == std::string::npos && brokers.find('.') == std::string::npos &&
      editDistance(brokers, "embedded") <= 2)
    return "did you mean 'embedded' (librdkafka's mock cluster in this process)?";
  std::stringstream list(brokers);
  int number = 0;
  for (std::string entry; std::getline(list, entry, ',');) {
    const std::string which = "entry " + std::to_string(++number);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    if (entry.empty()) return which + " is empty (a stray comma?)";
    if (entry.find_first_of("; \t") != std::string::npos)
      return which +
             " holds a space or ';': entries are separated by commas "
             "(\"kafka-1:9092,kafka-2:9092\")";
    if (const auto scheme = entry.find("://"); scheme != std::string::npos) {
      std::string proto = entry.substr(0, scheme);
      for (char& c : proto) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (proto != "plaintext" && proto != "ssl" && proto != "sasl_plaintext" &&
          proto != "sasl_ssl")
        return which + ": expected HOST:PORT (no URL scheme; librdkafka knows only " +
               "plaintext://, ssl://, sasl_plaintext:// and sasl_ssl://, and the protocol is " +
               "set by kafka.properties security.protocol)";
      entry.erase(0, scheme + 3);
    }
    if (entry.find('/') != std::string::npos)
      return which +
             ": expected HOST:PORT (a '/' is no part of one; a protocol prefix is written "
             "SASL_SSL://HOST:PORT)";
    const auto colon = entry.rfind(':');
    if (entry.find(':') != colon && entry.front() != '[') {  // a bare IPv6 address, no port
      unsigned char buf[16];
      if (inet_pton(AF_INET6, entry.c_str(), buf) != 1)
        return which + ": more than one ':' and not an IPv6 address (an IPv6 address with a " +
               "port goes in brackets: [::1]:9092)";
      continue;
    }
    if (colon == std::string::npos) continue;  // no port: librdkafka's 9092
    const std::string port = entry.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (colon == 0) return which + ": no host before the port";
    if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535)
      return which + " (host '" + entry.substr(0, colon) +
             "'): the port must be a number from 1 to 65535";
  }
  return "";
}

/// The configuration's reader: core/yaml_reader.hpp's, with the configuration's checks.
class Reader : public YamlReader {
 public:
  Reader(std::string file, std::vector<ConfigError>& errors, std::vector<ConfigError>& warnings,
         std::vector<ConfigError>& service_errors)
      : YamlReader(std::move(file), errors, warnings), service_errors_(service_errors) {}
  using YamlReader::error;

  /// A secret that cannot be read here: a warning, and an error at start-up (LoadResult).
  void serviceError(const YAML::Node& n, const std::string& path, const std::string& message) {
    warn(n, path, message + "; assayd refuses to start unless the service can read it");
    service_errors_.push_back(at(n.Mark(), path, message));
  }

  /// A secret from `files_key` (a file) or `env_key` (an environment variable) of `n`, scalar
  /// keys; nullopt when neither is given, or when it cannot be read (serviceError).
  std::optional<std::string> secret(const YAML::Node& n, const std::string& p,
                                    const char* files_key, const char* env_key) {
    std::string file, env;
    get(n, files_key, p, file);
    get(n, env_key, p, env);
    if (!file.empty() && !env.empty()) {
      error(n[env_key], join(p, env_key),
            std::string("give ") + files_key + " or " + env_key + ", not both");
      return std::nullopt;
    }
    return secretFrom(n[file.empty() ? env_key : files_key],
                      join(p, file.empty() ? env_key : files_key), file, env);
  }

  /// The secret in `file` or in the variable `env` (one of them non-empty), for `node`.
  std::optional<std::string> secretFrom(const YAML::Node& node, const std::string& path,
                                        const std::string& file, const std::string& env) {
    if (!file.empty()) {
      if (secretFileDeferred(file)) {
        serviceError(node, path,
                     "read from $CREDENTIALS_DIRECTORY at start-up (LoadCredential=), which is "
                     "not set here");
        return std::nullopt;
      }
      try {
        return readSecretFile(file);
      } catch (const SecretContentError& e) {  // read, and wrong for the service too
        error(node, path, e.what());
        return std::nullopt;
      } catch (const std::exception& e) {
        serviceError(node, path, e.what());
        return std::nullopt;
      }
    }
    if (env.empty()) return std::nullopt;
    if (!isVariableName(env)) {  // a secret pasted where its variable's name goes: never echoed
      error(node, path,
            "expected the name of an environment variable (letters, digits and _); this value "
            "is not one (it is not printed: it may be the secret itself)");
      return std::nullopt;
    }
    const char* value = std::getenv(env.c_str());
    if (value && *value) return std::string(value);
    serviceError(node, path, "environment variable " + variableShown(env) + " is not set");
    return std::nullopt;
  }

  /// A key that is accepted but does nothing in this configuration (docs/configuration.md).
  void warn(const YAML::Node& n, const std::string& path, const std::string& message) {
    addWarning(n.Mark(), path, "warning: " + message);
  }
  void inert(const YAML::Node& n, const std::string& path, const std::string& why) {
    addWarning(n.Mark(), path,
               "warning: accepted, but has no effect in this configuration (" + why + ")");
  }
  void error(const YAML::Node& n, const std::string& path, const std::string& message) {
    error(n.Mark(), path, message);
  }

  /// Reports keys of `map` not in `known`; false if `map` is not a mapping.
  bool checkMap(const YAML::Node& map, const std::string& path,
                const std::vector<std::string_view>& known) {
    if (!map.IsMap()) {
      error(map, path, "expected a mapping");
      return false;
    }
    for (const auto& kv : map) {
      const auto key = kv.first.as<std::string>("");
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string msg = "unknown key";
      if (const std::string best = nearestKey(key, known); !best.empty()) {
        msg += "; did you mean '" + best + "'?";
      } else {
        msg += " (known keys:";
        for (auto k : known) msg += " " + std::string(k);
        msg += ")";
      }
      error(kv.first, join(path, key), msg);
    }
    return true;
  }

  template <typename T>
  void get(const YAML::Node& map, const char* key, const std::string& path, T& out) {
    const YAML::Node n = map[key];
    if (!n) return;
    T v{};
    if (!n.IsScalar() || !YAML::convert<T>::decode(n, v)) {
      std::string hint;
      if constexpr (std::is_floating_point_v<T>) {
        const std::string text = n.IsScalar() ? n.Scalar() : "";
        char* end = nullptr;
        const double pct = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        if (end && end != text.c_str() && std::string_view(end) == "%")
          hint = " (a share is written as a fraction: " + formatNumber(pct / 100) + " for " + text +
                 ")";
      }
      error(n, join(path, key), std::string("expected ") + typeName<T>() + hint);
      return;
    }
    out = v;
  }

  void getRate(const YAML::Node& map, const char* key, const std::string& path, double& out,
               bool allow_zero = true) {
    const YAML::Node n = map[key];
    if (!n) return;
    double v = 0;
    get(map, key, path, v);
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v)) return;
    if (!(v >= 0.0 && v <= 1.0) || (!allow_zero && v == 0.0)) {
      error(n, join(path, key), allow_zero ? "must be between 0 and 1" : "must be in (0, 1]");
      return;
    }
    out = v;
  }

  template <typename T>
  void getRange(const YAML::Node& map, const char* key, const std::string& path, T& out, T lo,
                T hi) {
    const YAML::Node n = map[key];
    if (!n) return;
    T v = out;
    get(map, key, path, v);
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v)) {  // .nan and .inf would pass every comparison below or break math
        std::ostringstream m;
        m << "must be a finite number between " << lo << " and " << hi;
        error(n, join(path, key), m.str());
        return;
      }
    }
    if (v < lo || v > hi) {
      std::ostringstream m;
      m << "must be between " << lo << " and " << hi;
      error(n, join(path, key), m.str());
      return;
    }
    out = v;
  }

  void getPointer(const YAML::Node& map, const char* key, const std::string& path,
                  std::string& out) {
    const YAML::Node n = map[key];
    if (!n) return;
    std::string v;
    get(map, key, path, v);
    if (!v.empty() && v.front() != '/') {
      error(n, join(path, key), "expected a JSON Pointer (RFC 6901) starting with '/', or ''");
      return;
    }
    // RapidJSON reads an invalid pointer (a '~' not followed by 0 or 1, a bad %-escape) as the
    // whole document: every event would then be refused at run time.
    if (const rapidjson::Pointer p(v.data(), v.size()); !p.IsValid()) {
      error(n, join(path, key),
            "not a valid JSON Pointer (RFC 6901) at character " +
                std::to_string(p.GetParseErrorOffset() + 1) +
                ": '~' must be followed by 0 ('~') or 1 ('/')");
      return;
    }
    out = v;
  }

 private:
  template <typename T>
  static const char* typeName() {
    if constexpr (std::is_same_v<T, bool>)
      return "true or false";
    else if constexpr (std::is_same_v<T, std::string>)
      return "a string";
    else if constexpr (std::is_floating_point_v<T>)
      return "a number";
    else
      return "an integer";
  }

  std::vector<ConfigError>& service_errors_;
};

/// kafka.secret_files / kafka.secret_env: {PROPERTY: FILE or VARIABLE}, appended to the
/// properties (a secret that cannot be read here: a placeholder, so that the clients can still
/// be built by --check-config; start-up refuses it first).
void loadKafkaSecrets(Reader& r, const YAML::Node& n, KafkaOptions& o) {
  for (const char* key : {"secret_files", "secret_env"}) {
    const auto m = n[key];
    if (!m) continue;
    const std::string kp = std::string("kafka.") + key;
    if (!m.IsMap()) {
      r.error(m, kp,
              "expected {librdkafka property: " +
                  std::string(key == std::string("secret_env") ? "VARIABLE" : "FILE") + "}");
      continue;
    }
    for (const auto& kv : m) {
      const auto property = kv.first.as<std::string>("");
      const std::string pp = kp + "." + property;
      const bool twice = std::any_of(o.properties.begin(), o.properties.end(),
                                     [&](const auto& pv) { return pv.first == property; });
      if (!kv.second.IsScalar() || kv.second.as<std::string>().empty() || twice) {
        r.error(kv.second, pp,
                twice ? "also in kafka.properties (or given twice): give the value once"
                      : "expected a file name or a variable name");
        continue;
      }
      const std::string where = kv.second.as<std::string>();
      const bool env = key == std::string("secret_env");
      const auto value = r.secretFrom(kv.second, pp, env ? "" : where, env ? where : "");
      char err[512];
      rd_kafka_conf_t* probe = rd_kafka_conf_new();
      const bool accepted =
          rd_kafka_conf_set(probe, property.c_str(), value ? value->c_str() : "unresolved", err,
                            sizeof err) == RD_KAFKA_CONF_OK;
      rd_kafka_conf_destroy(probe);
      if (!accepted) {  // the value is a secret: never in the message
        r.error(kv.first, pp, "librdkafka refuses the property '" + property + "'");
        continue;
      }
      o.properties.emplace_back(property, value ? *value : "unresolved");
      const auto mark = kv.first.Mark();
      o.property_positions.push_back(
          {property, mark.is_null() ? 0 : mark.line + 1, mark.is_null() ? 0 : mark.column + 1});
    }
  }
}

void loadKafka(Reader& r, const YAML::Node& n, KafkaOptions& o) {
  const std::string p = "kafka";
  if (!r.checkMap(n, p,
                  {"brokers", "format", "topic", "group_id", "feedback_topic", "results_topic",
                   "dead_letter_topic", "partitions", "properties", "secret_files", "secret_env"}))
    return;
  r.get(n, "brokers", p, o.brokers);
  if (const auto f = n["format"]) {
    std::string format;
    r.get(n, "format", p, format);
    std::string names;  // "a, b or c"
    bool known = false;
    const std::size_t n_names = std::size(kEventFormatNames);
    for (std::size_t i = 0; i < n_names; ++i) {
      names += std::string(i == 0 ? "" : i + 1 == n_names ? " or " : ", ") + kEventFormatNames[i];
      if (format == kEventFormatNames[i]) {
        o.format = static_cast<EventFormat>(i);
        known = true;
      }
    }
    if (!known && f.IsScalar())
      r.error(f, p + ".format", "expected " + names + ", got '" + format + "'");
  }
  r.get(n, "topic", p, o.topic);
  r.get(n, "group_id", p, o.group_id);
  r.get(n, "feedback_topic", p, o.feedback_topic);
  r.get(n, "results_topic", p, o.results_topic);
  r.get(n, "dead_letter_topic", p, o.dead_letter_topic);
  r.getRange(n, "partitions", p, o.partitions, 1, 256);
  if (o.brokers.empty()) r.error(n["brokers"], p + ".brokers", "must not be empty");
  if (const std::string why = brokersProblem(o.brokers); !why.empty())
    r.error(n["brokers"], p + ".brokers", why);
  if (o.topic.empty()) r.error(n["topic"], p + ".topic", "must not be empty");
  for (const auto& [key, topic] : {std::pair<const char*, const std::string&>{"topic", o.topic},
                                   {"results_topic", o.results_topic},
                                   {"dead_letter_topic", o.dead_letter_topic},
                                   {"feedback_topic", o.feedback_topic}})
    if (!topic.empty())
      if (const std::string why = kafkaTopicProblem(topic); !why.empty())
        r.error(n[key], p + "." + key, why);
  if (o.group_id.empty()) r.error(n["group_id"], p + ".group_id", "must not be empty");
  if (const auto props = n["properties"]) {
    if (const auto m = props.Mark(); !m.is_null())
      o.properties_line = m.line + 1, o.properties_column = m.column + 1;
    if (!props.IsMap()) {
      r.error(props, p + ".properties", "expected a mapping of librdkafka properties");
    } else {
      // librdkafka itself says whether a property exists and its value is valid.
      rd_kafka_conf_t* probe = rd_kafka_conf_new();
      for (const auto& kv : props) {
        const auto key = kv.first.as<std::string>("");
        const std::string kp = p + ".properties." + key;
        if (!kv.second.IsScalar()) {
          r.error(kv.second, kp, "expected a scalar value");
          continue;
        }
        const auto value = kv.second.as<std::string>();
        char err[512];
        if (rd_kafka_conf_set(probe, key.c_str(), value.c_str(), err, sizeof err) !=
            RD_KAFKA_CONF_OK) {
          r.error(kv.first, kp, "librdkafka: " + kafkaPropertyMessage(key, value, err));
          continue;
        }
        o.properties.emplace_back(key, value);
        const auto m = kv.first.Mark();
        o.property_positions.push_back(
            {key, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1});
      }
      rd_kafka_conf_destroy(probe);
    }
  }
  loadKafkaSecrets(r, n, o);
  // Feedback is joined on the instance that judged its event: only the range assignor gives
  // partition p of both topics to one instance (daemon/pipeline.cpp checks it at run time).
  for (const auto& [key, value] : o.properties)
    if (key == "partition.assignment.strategy" && !o.feedback_topic.empty() &&
        value.rfind("range", 0) != 0)
      r.warn(n["properties"][key], p + ".properties." + key,
             "with kafka.feedback_topic and more than one instance, '" + value +
                 "' gives an events partition and the feedback partition of the same number to "
                 "different instances: feedback is joined only on the instance that judged its "
                 "event, so most of it would never join (assay_feedback_copartitioned 0). Use "
                 "range, with both topics of the same partition count and keyed by event id");
}

void loadEvents(Reader& r, const YAML::Node& n, EventFieldOptions& o) {
  const std::string p = "events";
  if (!r.checkMap(n, p,
                  {"id", "timestamp", "tenant", "app", "variant", "model", "question", "contexts",
                   "answer", "reference", "relevant_context_ids", "expected_format"}))
    return;
  r.getPointer(n, "id", p, o.id);
  r.getPointer(n, "timestamp", p, o.timestamp);
  r.getPointer(n, "tenant", p, o.tenant);
  r.getPointer(n, "app", p, o.app);
  r.getPointer(n, "variant", p, o.variant);
  r.getPointer(n, "model", p, o.model);
  r.getPointer(n, "question", p, o.question);
  r.getPointer(n, "contexts", p, o.contexts);
  r.getPointer(n, "answer", p, o.answer);
  r.getPointer(n, "reference", p, o.reference);
  r.getPointer(n, "relevant_context_ids", p, o.relevant_context_ids);
  r.getPointer(n, "expected_format", p, o.expected_format);
  if (o.question.empty())
    r.error(n["question"], p + ".question", "a required field needs a pointer");
  if (o.answer.empty()) r.error(n["answer"], p + ".answer", "a required field needs a pointer");
}

void loadOtlp(Reader& r, const YAML::Node& n, OtlpOptions& o) {
  const std::string p = "otlp";
  if (!r.checkMap(n, p,
                  {"mapping", "attributes", "join_timeout_ms", "max_trace_age_ms", "max_traces",
                   "max_bytes", "incomplete"}))
    return;
  r.get(n, "mapping", p, o.mapping);
  if (o.mapping != "openinference" && o.mapping != "gen_ai")
    r.error(n["mapping"], p + ".mapping",
            "expected openinference or gen_ai, got '" + o.mapping + "'");
  if (const auto a = n["attributes"]) {
    if (!a.IsMap()) {
      r.error(a, p + ".attributes", "expected a mapping of attribute names");
    } else {
      const std::vector<std::string_view> known(OtlpOptions::kAttributeKeys.begin(),
                                                OtlpOptions::kAttributeKeys.end());
      r.checkMap(a, p + ".attributes", known);
      for (const auto& kv : a) {
        const auto key = kv.first.as<std::string>("");
        if (std::find(known.begin(), known.end(), key) == known.end()) continue;
        const std::string kp = p + ".attributes." + key;
        const bool list = key == "retrieval_kind" || key == "generation_kind";
        if (!kv.second.IsScalar() ||
            kv.second.Scalar().find_first_not_of(list ? " ," : " ") == std::string::npos) {
          r.error(kv.second, kp,
                  list ? "expected the attribute's values, comma-separated"
                       : "expected a non-empty attribute name");
          continue;
        }
        o.attributes.emplace_back(key, kv.second.Scalar());
      }
    }
  }
  r.getRange(n, "join_timeout_ms", p, o.join_timeout_ms, 1, 3'600'000);
  r.getRange(n, "max_trace_age_ms", p, o.max_trace_age_ms, 1, 86'400'000);
  if (o.max_trace_age_ms < o.join_timeout_ms)
    r.error(n["max_trace_age_ms"] ? n["max_trace_age_ms"] : n, p + ".max_trace_age_ms",
            "must be at least join_timeout_ms (" + std::to_string(o.join_timeout_ms) + ")");
  r.getRange<std::size_t>(n, "max_traces", p, o.max_traces, 1, 10'000'000);
  r.getRange<std::size_t>(n, "max_bytes", p, o.max_bytes, 1u << 20, std::size_t{16} << 30);
  if (const auto inc = n["incomplete"]) {
    std::string v;
    r.get(n, "incomplete", p, v);
    if (v == "judge")
      o.judge_incomplete = true;
    else if (v == "count")
      o.judge_incomplete = false;
    else if (inc.IsScalar())
      r.error(inc, p + ".incomplete", "expected judge or count, got '" + v + "'");
  }
}

void loadRedact(Reader& r, const YAML::Node& n, RedactOptions& o) {
  const std::string p = "redact";
  bool bad = false;  // an error said it already: no "has no effect" warning on top
  if (!r.checkMap(n, p, {"detectors", "patterns", "local_judges", "sinks"})) return;
  if (const auto d = n["detectors"]) {
    if (!d.IsSequence()) {
      r.error(d, p + ".detectors",
              "expected a list of detector names (email, phone, card, iban, ip, token)");
      bad = true;
    } else {
      for (std::size_t i = 0; i < d.size(); ++i) {
        const std::string name = d[i].IsScalar() ? d[i].Scalar() : "";
        const std::string kp = p + ".detectors[" + std::to_string(i) + "]";
        if (std::find(kRedactDetectors.begin(), kRedactDetectors.end(), name) ==
            kRedactDetectors.end()) {
          r.error(d[i], kp,
                  "unknown detector '" + name + "' (known: email, phone, card, iban, ip, token)");
          bad = true;
          continue;
        }
        o.detectors.push_back(name);
      }
    }
  }
  if (const auto pats = n["patterns"]) {
    if (!pats.IsMap()) {
      r.error(pats, p + ".patterns", "expected a mapping NAME: RE2_REGEX");
      bad = true;
    } else if (const auto why = userPatternCountProblem(pats.size()); !why.empty()) {
      r.error(pats, p + ".patterns", why);  // once, with the count
      bad = true;
    } else {
      for (const auto& kv : pats) {
        const auto name = kv.first.as<std::string>("");
        const std::string kp = p + ".patterns." + name;
        if (!kv.second.IsScalar()) {
          r.error(kv.second, kp, "expected an RE2 regex");
          bad = true;
          continue;
        }
        RedactOptions probe;  // the patterns so far and this one: names taken, regex errors
        probe.patterns = o.patterns;
        probe.patterns.emplace_back(name, kv.second.Scalar());
        try {
          Redactor check(probe);
        } catch (const std::invalid_argument& e) {
          r.error(kv.first, kp, e.what());
          bad = true;
          continue;
        }
        o.patterns.emplace_back(name, kv.second.Scalar());
      }
    }
  }
  r.get(n, "local_judges", p, o.local_judges);
  r.get(n, "sinks", p, o.sinks);
  if (!bad && o.detectors.empty() && o.patterns.empty())
    r.inert(n, p, "no detector and no pattern is on");
}

void loadSampling(Reader& r, const YAML::Node& n, SamplingOptions& o) {
  const std::string p = "sampling";
  if (!r.checkMap(n, p, {"rate", "rules"})) return;
  r.getRate(n, "rate", p, o.rate);
  const auto rules = n["rules"];
  if (!rules) return;
  if (!rules.IsSequence()) {
    r.error(rules, p + ".rules", "expected a list of {match: {tenant?, app?}, rate}");
    return;
  }
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const auto rule = rules[i];
    const std::string rp = p + ".rules[" + std::to_string(i) + "]";
    if (!r.checkMap(rule, rp, {"match", "rate"})) continue;
    SamplingRule sr;
    if (!rule["rate"]) r.error(rule, rp + ".rate", "missing");
    r.getRate(rule, "rate", rp, sr.rate);
    const auto match = rule["match"];
    if (!match) {
      r.error(rule, rp + ".match", "missing (a rule without match would hide every later rule)");
    } else if (r.checkMap(match, rp + ".match", {"tenant", "app"})) {
      r.get(match, "tenant", rp + ".match", sr.tenant);
      r.get(match, "app", rp + ".match", sr.app);
      if (sr.tenant.empty() && sr.app.empty()) r.error(match, rp + ".match", "needs tenant or app");
    }
    o.rules.push_back(sr);
  }
}

void loadLimits(Reader& r, const YAML::Node& n, LimitsOptions& o) {
  const std::string p = "limits";
  if (!r.checkMap(
          n, p, {"queue_capacity", "max_event_bytes", "workers", "drain_timeout_ms", "when_full"}))
    return;
  std::string when_full = "block";
  r.get(n, "when_full", p, when_full);
  if (when_full == "block")
    o.when_full = LimitsOptions::WhenFull::kBlock;
  else if (when_full == "drop_newest")
    o.when_full = LimitsOptions::WhenFull::kDropNewest;
  else
    r.error(n["when_full"], p + ".when_full",
            "expected block or drop_newest, got '" + when_full + "'");
  r.getRange<std::size_t>(n, "queue_capacity", p, o.queue_capacity, 1, 10'000'000);
  r.getRange<std::size_t>(n, "max_event_bytes", p, o.max_event_bytes, 64, 64u << 20);
  r.getRange(n, "workers", p, o.workers, 1, 64);
  r.getRange(n, "drain_timeout_ms", p, o.drain_timeout_ms, 0, 3'600'000);
  if (o.drain_timeout_ms > 45'000)
    r.warn(n["drain_timeout_ms"], p + ".drain_timeout_ms",
           "longer than 45 s: the shipped systemd unit stops assayd with SIGKILL after "
           "TimeoutStopSec=60 (drain, then up to 10 s for the results topic); raise it with a "
           "drop-in");
}

/// budget.tenants / budget.apps: {name: euros per day}, "*" for every one not listed.
void loadScopeCaps(Reader& r, const YAML::Node& n, const std::string& p,
                   std::vector<std::pair<std::string, double>>& out) {
  if (!n) return;
  if (!n.IsMap()) {
    r.error(n, p, "expected a mapping {name: euros per day} (\"*\": every other one)");
    return;
  }
  constexpr std::size_t kMaxNamed = 10'000;
  if (n.size() > kMaxNamed) {
    r.error(n, p,
            std::to_string(n.size()) + " entries: at most " + std::to_string(kMaxNamed) +
                " (use \"*\" for the rest)");
    return;
  }
  for (const auto& kv : n) {
    const std::string name = kv.first.as<std::string>("");
    const std::string at = p + "." + name;
    if (name.empty() || name.size() > 128 || !isValidUtf8(name) ||
        std::any_of(name.begin(), name.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      r.error(kv.first, p,
              "a name of 1 to 128 bytes of UTF-8 without control characters (the event's value, "
              "or \"*\")");
      continue;
    }
    double cap = 0;
    if (!kv.second.IsScalar() || !YAML::convert<double>::decode(kv.second, cap) ||
        !std::isfinite(cap) || cap < 0 || cap > llm::kMaxLedgerEuros) {
      r.error(kv.second, at,
              "expected euros per day from 0 to " +
                  std::to_string(static_cast<long>(llm::kMaxLedgerEuros)));
      continue;
    }
    out.emplace_back(name, cap);
  }
}

void loadBudget(Reader& r, const YAML::Node& n, BudgetOptions& o) {
  const std::string p = "budget";
  if (!r.checkMap(n, p,
                  {"usd_to_eur", "daily_limit_eur", "alert_ratio", "timezone", "store",
                   "key_prefix", "password_file", "password_env", "prices", "tenants", "apps"}))
    return;
  loadScopeCaps(r, n["tenants"], p + ".tenants", o.tenant_caps);
  loadScopeCaps(r, n["apps"], p + ".apps", o.app_caps);
  r.getRange(n, "usd_to_eur", p, o.usd_to_eur, 0.0001, 10000.0);
  // The ledger holds amounts up to kMaxLedgerEuros (exact integer nano-euros in Redis' Lua).
  r.getRange(n, "daily_limit_eur", p, o.daily_limit_eur, 0.0, llm::kMaxLedgerEuros);
  for (const auto* caps : {&o.tenant_caps, &o.app_caps})
    for (const auto& [name, cap] : *caps)
      if (cap > o.daily_limit_eur) {
        const std::string key = caps == &o.tenant_caps ? "tenants" : "apps";
        r.warn(n[key][name], p + "." + key + "." + name,
               formatNumber(cap) + " euros a day is above budget.daily_limit_eur (" +
                   formatNumber(o.daily_limit_eur) +
                   "): the global cap stops every call first, so this cap never applies");
      }
  r.getRange(n, "alert_ratio", p, o.alert_ratio, 0.0, 1.0);
  r.get(n, "timezone", p, o.timezone);
  r.get(n, "store", p, o.store);
  r.get(n, "key_prefix", p, o.key_prefix);
  o.store_password = r.secret(n, p, "password_file", "password_env");
  if (n["key_prefix"]) {
    if (o.key_prefix.empty() || o.key_prefix.size() > 128)
      r.error(n["key_prefix"], p + ".key_prefix", "must be 1 to 128 bytes");
    else if (o.key_prefix.find_first_of("{} \t\r\n") != std::string::npos)
      r.error(n["key_prefix"], p + ".key_prefix",
              "must not contain braces (a Redis Cluster hash tag: assay keeps one per day) or "
              "white space");
  }
  if (o.store != "memory") {
    try {
      (void)llm::parseRedisUrl(o.store);
    } catch (const std::invalid_argument& e) {
      r.error(
          n["store"], p + ".store",
          std::string(e.what()).substr(std::string_view("budget.store: ").size()) + "; or memory");
    }
  }
  try {
    (void)llm::budgetDay(o.timezone, 0);
  } catch (const std::exception&) {
    r.error(n["timezone"] ? n["timezone"] : n, p + ".timezone",
            "unknown time zone '" + o.timezone + "' (an IANA name such as Europe/Paris)");
  }
  if (const auto prices = n["prices"]) {
    if (!prices.IsMap()) {
      r.error(prices, p + ".prices",
              "expected {model: {input, cached_input?, cache_write?, output}} in USD per million "
              "tokens");
    } else {
      for (const auto& kv : prices) {
        const auto model = kv.first.as<std::string>("");
        const std::string mp = p + ".prices." + model;
        if (!r.checkMap(kv.second, mp, {"input", "cached_input", "cache_write", "output"}))
          continue;
        PriceOverride po;
        po.model = model;
        po.input = po.cached_input = -1;
        po.output = -1;
        r.getRange(kv.second, "input", mp, po.input, 0.0, 10000.0);
        r.getRange(kv.second, "output", mp, po.output, 0.0, 10000.0);
        po.cached_input = po.input;
        r.getRange(kv.second, "cached_input", mp, po.cached_input, 0.0, 10000.0);
        po.cache_write = po.input * 1.25;  // llm::kDefaultCacheWriteMultiplier
        r.getRange(kv.second, "cache_write", mp, po.cache_write, 0.0, 10000.0);
        if (po.input < 0 || po.output < 0) {
          r.error(kv.second, mp, "needs input and output (USD per million tokens)");
          continue;
        }
        o.prices.push_back(po);
      }
    }
  }
}

OptionTree toTree(const YAML::Node& n) {
  OptionTree t;
  if (n.IsMap()) {
    t.kind = OptionTree::Kind::kMap;
    for (const auto& kv : n) t.map.push_back({kv.first.as<std::string>(""), toTree(kv.second)});
  } else if (n.IsSequence()) {
    t.kind = OptionTree::Kind::kList;
    for (const auto& item : n) t.list.push_back(toTree(item));
  } else if (n.IsScalar()) {
    t.scalar = n.Scalar();
  }
  return t;
}

/// The node at an option path ("rubric.examples[1].score") under a judge's node, or the
/// deepest node found on the way (for an error's position).
YAML::Node nodeAt(const YAML::Node& judge, const std::string& path) {
  YAML::Node at = judge;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') ++i;
    if (path[i] == '[') {
      const auto close = path.find(']', i);
      if (close == std::string::npos || !at.IsSequence()) break;
      const auto index = std::strtoul(path.c_str() + i + 1, nullptr, 10);
      if (index >= at.size()) break;
      const YAML::Node next = at[index];
      at.reset(next);  // rebinds (Node's operator= would overwrite the value)
      i = close + 1;
    } else {
      const auto end = path.find_first_of(".[", i);
      const std::string key = path.substr(i, end == std::string::npos ? end : end - i);
      if (!at.IsMap() || !at[key]) break;
      const YAML::Node next = at[key];
      at.reset(next);
      i = end == std::string::npos ? path.size() : end;
    }
  }
  return at;
}

void loadJudgeOptions(Reader& r, const YAML::Node& n, const std::string& p, JudgeConfig& j) {
  for (const auto& spec : j.factory->descriptor->options) {
    const auto v = n[std::string(spec.name)];
    if (!v) continue;
    const std::string key = p + "." + std::string(spec.name);
    switch (spec.type) {
      case OptionType::kInt: {
        std::int64_t x = 0;
        if (v.IsScalar() && YAML::convert<std::int64_t>::decode(v, x))
          j.values.set(std::string(spec.name), x);
        else
          r.error(v, key, "expected an integer");
        break;
      }
      case OptionType::kNumber: {
        double x = 0;
        if (v.IsScalar() && YAML::convert<double>::decode(v, x) && std::isfinite(x))
          j.values.set(std::string(spec.name), x);
        else
          r.error(v, key, "expected a finite number");
        break;
      }
      case OptionType::kBool: {
        bool x = false;
        if (v.IsScalar() && YAML::convert<bool>::decode(v, x))
          j.values.set(std::string(spec.name), x);
        else
          r.error(v, key, "expected true or false");
        break;
      }
      case OptionType::kString:
        if (v.IsScalar())
          j.values.set(std::string(spec.name), v.as<std::string>());
        else
          r.error(v, key, "expected a string");
        break;
      case OptionType::kStringList: {
        std::vector<std::string> list;
        bool ok = v.IsSequence();
        if (ok)
          for (const auto& item : v) {
            if (!item.IsScalar()) {
              ok = false;
              break;
            }
            list.push_back(item.as<std::string>());
          }
        if (ok)
          j.values.set(std::string(spec.name), std::move(list));
        else
          r.error(v, key, "expected a list of strings");
        break;
      }
      case OptionType::kTree:
        j.values.set(std::string(spec.name), toTree(v));
        break;
    }
  }
}

void loadRunIf(Reader& r, const YAML::Node& j, const std::string& jp, JudgeConfig& jc,
               const std::vector<JudgeConfig>& earlier) {
  const auto n = j["run_if"];
  if (!n) return;
  const std::string p = jp + ".run_if";
  if (!n.IsSequence()) {
    r.error(n, p, "expected a list of {judge, below?, above?, passed?}");
    return;
  }
  for (std::size_t i = 0; i < n.size(); ++i) {
    const auto c = n[i];
    const std::string cp = p + "[" + std::to_string(i) + "]";
    if (!r.checkMap(c, cp, {"judge", "below", "above", "passed"})) continue;
    RunIfCondition rc;
    r.get(c, "judge", cp, rc.judge);
    const auto found = std::find_if(earlier.begin(), earlier.end(),
                                    [&](const JudgeConfig& e) { return e.name == rc.judge; });
    if (found == earlier.end()) {
      r.error(c["judge"] ? c["judge"] : c, cp + ".judge",
              rc.judge.empty() ? "missing"
                               : "'" + rc.judge + "' is not a judge listed before this one");
      continue;
    }
    if (found->factory->descriptor->cost == CostClass::kRemoteCall) {
      // Asynchronous judges start after every local judge of the event, side by side: none
      // can wait for another's verdict.
      r.error(c["judge"], cp + ".judge",
              "'" + rc.judge + "' is an asynchronous (" +
                  std::string(judgeKindName(found->factory->descriptor->kind)) +
                  ") judge: its verdict arrives after the judges that could depend on it start");
      continue;
    }
    if (c["below"]) {
      double v = 0;
      r.get(c, "below", cp, v);
      rc.below = v;
    }
    if (c["above"]) {
      double v = 0;
      r.get(c, "above", cp, v);
      rc.above = v;
    }
    if (c["passed"]) {
      bool v = false;
      r.get(c, "passed", cp, v);
      rc.passed = v;
    }
    if (!rc.below && !rc.above && !rc.passed) r.error(c, cp, "needs below, above or passed");
    jc.run_if.push_back(rc);
  }
}

/// The judge type of an entry: its kind, then the type key of that kind (`check:`, `metric:`),
/// or the kind's only type (`kind: llm`). nullptr after reporting the error.
const JudgeFactory* judgeTypeOf(Reader& r, const YAML::Node& j, const std::string& jp) {
  static const std::pair<const char*, JudgeKind> kKinds[] = {{"check", JudgeKind::kCheck},
                                                             {"lexical", JudgeKind::kLexical},
                                                             {"retrieval", JudgeKind::kRetrieval},
                                                             {"llm", JudgeKind::kLlm}};
  std::string kind;
  r.get(j, "kind", jp, kind);
  const auto* k = std::find_if(std::begin(kKinds), std::end(kKinds),
                               [&](const auto& e) { return kind == e.first; });
  if (k == std::end(kKinds)) {
    r.error(j["kind"] ? j["kind"] : j, jp + ".kind",
            kind.empty() ? "missing (check, lexical, retrieval or llm)"
                         : "unknown kind '" + kind + "' (check, lexical, retrieval, llm)");
    return nullptr;
  }
  const char* type_key = judgeTypeKey(k->second);
  if (!type_key) return findJudgeFactory(k->second, kind);
  std::string type;
  r.get(j, type_key, jp, type);
  if (const auto* f = findJudgeFactory(k->second, type)) return f;
  std::string known;
  for (const auto& f : judgeRegistry())
    if (f.descriptor->kind == k->second)
      known += (known.empty() ? "" : ", ") + std::string(f.descriptor->type);
  r.error(j[type_key] ? j[type_key] : j, jp + "." + type_key,
          (type.empty() ? std::string("missing") : "unknown " + kind + " '" + type + "'") +
              " (one of: " + known + ")");
  return nullptr;
}

/// Checks a judge's options the way start-up will use them: its factory, without services.
void checkJudgeOptions(Reader& r, const YAML::Node& j, const std::string& jp, const JudgeConfig& jc,
                       const Config& config) {
  JudgeContext ctx;
  ctx.name = jc.name;
  ctx.budget = &config.budget;
  ctx.max_waiting = judgeBacklog(config.limits);
  ctx.hold_when_open = config.limits.when_full == LimitsOptions::WhenFull::kBlock;
  ctx.warn = [&](const std::string& key, const std::string& message) {
    r.warn(nodeAt(j, key), jp + "." + key, message);
  };
  try {
    (void)jc.factory->create(jc.values, ctx);  // the daemon builds its own later
  } catch (const OptionError& e) {
    auto report = [&](const std::string& key, const std::string& message) {
      r.error(nodeAt(j, key), key.empty() ? jp : jp + "." + key, message);
    };
    report(e.key, e.what());
    for (const auto& [key, message] : e.others) report(key, message);
  }
}

/// The JSON Pointers a judge reads from the event message (a custom rubric's inputs) join the
/// parser's extra fields; traces have no event message to read them from.
void gatherEventFields(Reader& r, const YAML::Node& j, const std::string& jp, const JudgeConfig& jc,
                       Config& config) {
  const auto fields = jc.factory->info(jc.values).event_fields;
  if (!fields.empty() && readsTraces(config.kafka.format))
    r.warn(nodeAt(j, "rubric.inputs"), jp + ".rubric.inputs",
           "kafka.format reads OpenTelemetry traces, which have no event message for the JSON "
           "Pointer inputs (" +
               fields.front() + "): every event would be not_applicable");
  auto& extra = config.events.extra;
  for (const auto& f : fields)
    if (std::find(extra.begin(), extra.end(), f) == extra.end()) extra.push_back(f);
}

/// Two LLM judges of one criterion on different scales are two rubrics under one metric label
/// (criterion="tone"): their series and agreement read as one criterion's.
void warnSharedCriterion(Reader& r, const YAML::Node& j, const std::string& jp,
                         const JudgeConfig& jc, const std::vector<JudgeConfig>& earlier) {
  const auto scale = [](const JudgeInfo& i) {
    return std::to_string(std::lround(i.min_score)) + "-" +
           std::to_string(std::lround(i.max_score));
  };
  if (jc.factory->descriptor->kind != JudgeKind::kLlm) return;
  const JudgeInfo info = jc.factory->info(jc.values);
  for (const auto& o : earlier) {
    if (o.factory->descriptor->kind != JudgeKind::kLlm) continue;
    const JudgeInfo other = o.factory->info(o.values);
    if (other.criterion != info.criterion ||
        (other.min_score == info.min_score && other.max_score == info.max_score))
      continue;
    r.warn(j["criterion"] ? j["criterion"] : j, jp + ".criterion",
           "judge '" + o.name + "' judges the criterion '" + info.criterion + "' on " +
               scale(other) + " too, this one on " + scale(info) +
               ": two rubrics under one criterion label; give this one its own name");
    return;
  }
}

void loadJudges(Reader& r, const YAML::Node& n, Config& config) {
  auto& out = config.judges;
  const std::string p = "judges";
  if (!n.IsSequence()) {
    r.error(n, p, "expected a list of judges");
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const auto j = n[i];
    const std::string jp = p + "[" + std::to_string(i) + "]";
    if (!j.IsMap()) {
      r.error(j, jp, "expected a mapping {name, kind, check|metric, ...}");
      continue;
    }
    JudgeConfig jc;
    if (const auto m = j.Mark(); !m.is_null()) jc.position = {m.line + 1, m.column + 1};
    for (const auto& kv : j)
      if (const auto m = kv.first.Mark(); !m.is_null())
        jc.key_positions[kv.first.as<std::string>("")] = {m.line + 1, m.column + 1};
    r.get(j, "name", jp, jc.name);
    if (jc.name.empty())
      r.error(j, jp + ".name", "missing");
    else if (std::any_of(jc.name.begin(), jc.name.end(),
                         [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      r.error(j["name"], jp + ".name",
              "control characters in a judge name (it is a metric label and a log word)");
    else if (!names.insert(jc.name).second)
      r.error(j["name"], jp + ".name", "duplicate judge name '" + jc.name + "'");
    jc.factory = judgeTypeOf(r, j, jp);
    if (!jc.factory) continue;
    std::vector<std::string_view> known = {"name", "kind", "rate", "run_if"};
    if (const char* type_key = judgeTypeKey(jc.factory->descriptor->kind))
      known.push_back(type_key);
    for (const auto& spec : jc.factory->descriptor->options) known.push_back(spec.name);
    r.checkMap(j, jp, known);
    r.getRate(j, "rate", jp, jc.rate, /*allow_zero=*/false);
    loadJudgeOptions(r, j, jp, jc);
    // Read once here: the trial build below, the version and the daemon's judge use the same
    // bytes (a weights file replaced in between cannot mislabel the version).
    jc.values.readFiles(jc.factory->descriptor->options);
    checkJudgeOptions(r, j, jp, jc, config);
    loadRunIf(r, j, jp, jc, out);
    gatherEventFields(r, j, jp, jc, config);
    warnSharedCriterion(r, j, jp, jc, out);
    jc.version =
        std::make_shared<const JudgeVersion>(judgeVersionOf(*jc.factory->descriptor, jc.values));
    out.push_back(std::move(jc));
  }
}

/// A judge name written under `at` that is not configured: the error, with the nearest name or
/// the configured ones.
void unknownJudge(Reader& r, const YAML::Node& where, const std::string& at,
                  const std::string& name, const Config& c) {
  std::vector<std::string_view> names;
  for (const auto& j : c.judges) names.push_back(j.name);
  std::string msg = "no judge of that name in judges";
  if (const std::string best = r.nearestKey(name, names); !best.empty()) {
    msg += "; did you mean '" + best + "'?";
  } else if (names.size() <= 20) {
    msg += " (judges:";
    for (const auto n : names) msg += " " + std::string(n);
    msg += ")";
  }
  r.error(where, at, msg);
}

bool configured(const Config& c, const std::string& name) {
  return std::any_of(c.judges.begin(), c.judges.end(),
                     [&](const JudgeConfig& j) { return j.name == name; });
}

void loadCanary(Reader& r, const YAML::Node& n, Config& c) {
  CanaryOptions& o = c.canary;
  const std::string p = "canary";
  if (!r.checkMap(n, p, {"file", "every", "sample", "label", "state_file", "judges"})) return;
  if (const YAML::Node list = n["judges"]) {
    if (!list.IsSequence() || list.size() == 0) {
      r.error(list, p + ".judges", "expected a list of judge names (leave it out for every judge)");
    } else {
      for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string at = p + ".judges[" + std::to_string(i) + "]";
        const std::string name = list[i].IsScalar() ? list[i].Scalar() : "";
        if (!configured(c, name))
          unknownJudge(r, list[i], at, name, c);
        else if (std::find(o.judges.begin(), o.judges.end(), name) != o.judges.end())
          r.error(list[i], at, "'" + name + "' is listed twice");
        else
          o.judges.push_back(name);
      }
    }
  }
  r.get(n, "file", p, o.file);
  if (o.file.empty())
    r.error(n["file"] ? n["file"] : n, p + ".file", "missing: the events to replay");
  if (const YAML::Node f = n["file"]) {
    const auto m = f.Mark();
    if (!m.is_null()) o.file_line = m.line + 1, o.file_column = m.column + 1;
  }
  if (const YAML::Node v = n["every"]) {
    const auto window = parseWindow(v.IsScalar() ? v.Scalar() : "");
    if (!window || window->second <= 0 || window->second > 7 * 86400.0)
      r.error(v, p + ".every", "expected a duration from 1m to 7d, such as 30m, 6h or 1d");
    else
      o.every_seconds = window->second;
  }
  r.getRange(n, "sample", p, o.sample, 1, 10'000);
  r.getPointer(n, "label", p, o.label);
  if (n["label"] && o.label.empty())
    r.error(n["label"], p + ".label",
            "expected a JSON Pointer to each line's label, such as /labels/hallucinated");
  r.get(n, "state_file", p, o.state_file);
}

void loadReview(Reader& r, const YAML::Node& n, Config& c) {
  ReviewOptions& o = c.review;
  const std::string p = "review";
  if (!r.checkMap(n, p, {"path", "topic", "judges", "share", "max_per_hour"})) return;
  r.get(n, "path", p, o.path);
  r.get(n, "topic", p, o.topic);
  if (n["path"] && o.path.empty()) r.error(n["path"], p + ".path", "must not be empty");
  if (n["topic"]) {
    if (const std::string why = kafkaTopicProblem(o.topic); !why.empty())
      r.error(n["topic"], p + ".topic", why);
  }
  if (!n["path"] && !n["topic"])
    r.error(n, p, "missing: a review file (path) or a Kafka topic (topic), or both");
  r.getRange(n, "share", p, o.share, 0.0, 1.0);
  r.getRange(n, "max_per_hour", p, o.max_per_hour, 1, 1'000'000);
  const YAML::Node judges = n["judges"];
  if (!judges || !judges.IsMap() || judges.size() == 0) {
    r.error(judges ? judges : n, p + ".judges",
            "expected {JUDGE: {below: SCORE}}: the judges whose verdicts are reviewed");
    return;
  }
  for (const auto& kv : judges) {
    const std::string name = kv.first.as<std::string>("");
    const std::string jp = p + ".judges." + name;
    const auto jc = std::find_if(c.judges.begin(), c.judges.end(),
                                 [&](const JudgeConfig& j) { return j.name == name; });
    if (jc == c.judges.end()) {
      unknownJudge(r, kv.first, jp, name, c);
      continue;
    }
    if (!r.checkMap(kv.second, jp, {"below"})) continue;
    ReviewOptions::Judge j{name, 0};
    const JudgeInfo info = jc->factory->info(jc->values);
    r.getRange(kv.second, "below", jp, j.below, info.min_score, info.max_score);
    if (!kv.second["below"]) r.error(kv.second, jp + ".below", "missing: the threshold");
    o.judges.push_back(j);
  }
}

void loadAb(Reader& r, const YAML::Node& n, AbOptions& o) {
  const std::string p = "ab";
  if (!r.checkMap(n, p,
                  {"experiments", "decision", "alpha", "min_ratings_per_arm", "assignment_ttl"}))
    return;
  r.get(n, "decision", p, o.decision);
  if (o.decision != "anytime" && o.decision != "chi_square")
    r.error(
        n["decision"], p + ".decision",
        "'" + o.decision +
            "': expected anytime (the anytime-valid test) or chi_square (the "
            "chi-square test at every look, whose real false-positive rate is far above alpha)");
  r.getRange(n, "alpha", p, o.alpha, 0.0001, 0.5);
  r.getRange(n, "min_ratings_per_arm", p, o.min_ratings_per_arm, 1, 1'000'000);
  r.getRange(n, "assignment_ttl", p, o.assignment_ttl_s, 1.0, 86400.0);
  const YAML::Node list = n["experiments"];
  if (!list) return;
  if (!list.IsSequence()) {
    r.error(list, p + ".experiments", "expected a list of {name, arms}");
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string ep = p + ".experiments[" + std::to_string(i) + "]";
    const YAML::Node e = list[i];
    if (!r.checkMap(e, ep, {"name", "arms"})) continue;
    AbExperiment x;
    r.get(e, "name", ep, x.name);
    if (x.name.empty() || x.name.size() > 128 ||
        x.name.find_first_of(" :{}\t\n") != std::string::npos)
      r.error(e["name"] ? e["name"] : e, ep + ".name",
              "required: 1 to 128 characters, no space, ':' or braces");
    else if (!names.insert(x.name).second)
      r.error(e["name"], ep + ".name", "'" + x.name + "' is already an experiment");
    const YAML::Node arms = e["arms"];
    // {control: 50, concise: 50} (the split), or [control, concise] (an even split).
    if (arms && arms.IsMap()) {
      for (const auto& kv : arms) {
        x.arms.push_back(kv.first.as<std::string>());
        double w = 0;
        if (!kv.second.IsScalar() || !YAML::convert<double>::decode(kv.second, w) || !(w > 0))
          r.error(kv.second, ep + ".arms." + x.arms.back(), "expected a share > 0");
        x.weights.push_back(w);
      }
    } else if (arms && arms.IsSequence()) {
      for (const auto& a : arms) {
        x.arms.push_back(a.as<std::string>());
        x.weights.push_back(1);
      }
    }
    std::set<std::string> distinct(x.arms.begin(), x.arms.end());
    if (x.arms.size() < 2 || x.arms.size() > 8 || distinct.size() != x.arms.size() ||
        distinct.count(""))
      r.error(arms ? arms : e, ep + ".arms",
              "expected 2 to 8 distinct arms: {ARM: SHARE, …} or [ARM, …] (an even split)");
    o.experiments.push_back(std::move(x));
  }
}

void loadTracking(Reader& r, const YAML::Node& n, TrackingOptions& o) {
  const std::string p = "tracking";
  if (!r.checkMap(n, p,
                  {"window", "window_seconds", "join_capacity", "leniency_max_ratio", "min_samples",
                   "min_pairs", "min_interval_n", "baseline_window", "recent_window", "drift_alpha",
                   "drift_min_delta", "rolling_baseline", "baseline_file", "baseline_from",
                   "baseline_until", "max_label_values"}))
    return;
  r.getRange(n, "window", p, o.window, 10, 1'000'000);
  r.getRange(n, "window_seconds", p, o.window_seconds, 0, 366 * 86400);
  r.getRange(n, "join_capacity", p, o.join_capacity, 100, 10'000'000);
  r.getRange(n, "leniency_max_ratio", p, o.leniency_max_ratio, 0.0, 1.0);
  r.getRange(n, "min_samples", p, o.min_samples, 1, 1'000'000);
  r.getRange(n, "min_pairs", p, o.min_pairs, 3, 1'000'000);
  r.getRange(n, "min_interval_n", p, o.min_interval_n, 2, 1'000'000);
  for (const char* key : {"baseline_window", "recent_window"}) {
    const YAML::Node v = n[key];
    if (!v) continue;
    const bool baseline = std::string_view(key) == "baseline_window";
    const auto window = parseWindow(v.IsScalar() ? v.Scalar() : "");
    if (!window) {
      r.error(v, p + "." + key,
              "expected a number of scores from 10 to 1000000, or a duration from 1m to 90d "
              "such as 30m, 6h or 7d");
      continue;
    }
    (baseline ? o.baseline_window : o.recent_window) = window->first;
    (baseline ? o.baseline_seconds : o.recent_seconds) = window->second;
  }
  r.getRange(n, "drift_alpha", p, o.drift_alpha, 1e-12, 0.5);
  r.getRange(n, "drift_min_delta", p, o.drift_min_delta, 0.0, 1e6);
  r.get(n, "rolling_baseline", p, o.rolling_baseline);
  r.get(n, "baseline_file", p, o.baseline_file);
  if (const YAML::Node bf = n["baseline_file"]) {
    const auto m = bf.Mark();
    if (!m.is_null()) o.baseline_file_line = m.line + 1, o.baseline_file_column = m.column + 1;
  }
  for (const char* key : {"baseline_from", "baseline_until"}) {
    std::string& value =
        std::string_view(key) == "baseline_from" ? o.baseline_from : o.baseline_until;
    r.get(n, key, p, value);
    if (!value.empty() && !parseRfc3339(value))
      r.error(n[key], p + "." + key, "expected an RFC 3339 time, e.g. 2026-11-01T00:00:00Z");
    if (!value.empty() && o.baseline_file.empty())
      r.error(n[key], p + "." + key, "needs tracking.baseline_file (the judgments to read)");
  }
  if (!o.baseline_file.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(o.baseline_file, ec) || !std::ifstream(o.baseline_file))
      r.error(n["baseline_file"], p + ".baseline_file",
              "cannot read '" + o.baseline_file + "' (a judgments JSON Lines file is expected)");
  }
  if (const auto from = parseRfc3339(o.baseline_from), until = parseRfc3339(o.baseline_until);
      from && until && *from >= *until)
    r.error(n["baseline_until"], p + ".baseline_until",
            "must be later than tracking.baseline_from (the range is [from, until))");
  // Settings that switch a statistic off for good are legal, but say so.
  if (o.min_samples > o.window)
    r.warn(n["min_samples"], p + ".min_samples",
           "larger than tracking.window (" + std::to_string(o.window) +
               "): the window never holds that many scores, so assay_judge_lenient never appears");
  if (o.min_pairs > o.window)
    r.warn(n["min_pairs"], p + ".min_pairs",
           "larger than tracking.window (" + std::to_string(o.window) +
               "): agreement, judge-vs-human Spearman and kappa never appear");
  if (!o.baseline_file.empty() && o.rolling_baseline)
    r.error(n["baseline_file"], p + ".baseline_file",
            "a baseline from a file is frozen: drop rolling_baseline");
  r.getRange(n, "max_label_values", p, o.max_label_values, 1, 10'000);
}

void loadAdmin(Reader& r, const YAML::Node& n, AdminOptions& o) {
  const std::string p = "admin";
  if (!r.checkMap(n, p, {"listen"})) return;
  r.get(n, "listen", p, o.listen);
  if (const YAML::Node l = n["listen"]; l && !l.Mark().is_null())
    o.listen_line = l.Mark().line + 1, o.listen_column = l.Mark().column + 1;
  const auto colon = o.listen.rfind(':');
  const std::string port = colon == std::string::npos ? "" : o.listen.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(port) > 65535)
    r.error(n["listen"] ? n["listen"] : n, p + ".listen",
            "expected HOST:PORT with a port from 0 to 65535 (0 = any free port)");
}

void loadSinks(Reader& r, const YAML::Node& n, SinksOptions& o) {
  const std::string p = "sinks";
  if (!r.checkMap(n, p, {"jsonl", "queue_capacity", "when_full"})) return;
  r.getRange<std::size_t>(n, "queue_capacity", p, o.queue_capacity, 1, 1'000'000);
  std::string when_full = "block";
  r.get(n, "when_full", p, when_full);
  if (when_full == "block")
    o.when_full = SinksOptions::WhenFull::kBlock;
  else if (when_full == "drop_newest")
    o.when_full = SinksOptions::WhenFull::kDropNewest;
  else
    r.error(n["when_full"], p + ".when_full",
            "expected block or drop_newest, got '" + when_full + "'");
  if (const auto j = n["jsonl"]) {
    if (!r.checkMap(j, p + ".jsonl", {"path"})) return;
    o.jsonl_enabled = true;
    r.get(j, "path", p + ".jsonl", o.jsonl.path);
    if (const YAML::Node path = j["path"]; path && !path.Mark().is_null())
      o.jsonl.path_line = path.Mark().line + 1, o.jsonl.path_column = path.Mark().column + 1;
    if (o.jsonl.path.empty()) r.error(j, p + ".jsonl.path", "missing");
  }
}

void loadLog(Reader& r, const YAML::Node& n, LogOptions& o) {
  const std::string p = "log";
  if (!r.checkMap(n, p, {"level", "format"})) return;
  r.get(n, "level", p, o.level);
  r.get(n, "format", p, o.format);
  if (o.format != "text" && o.format != "json")
    r.error(n["format"], p + ".format", "expected text or json");
  // spdlog's names (as printed in the log) and their short forms.
  static const std::vector<std::string> kLevels = {"trace",   "debug", "info",     "warn",
                                                   "warning", "error", "critical", "off"};
  if (std::find(kLevels.begin(), kLevels.end(), o.level) == kLevels.end())
    r.error(n["level"], p + ".level",
            "expected one of trace, debug, info, warning (warn), error, critical, off");
  if (o.level == "warn") o.level = "warning";
}

}  // namespace

namespace {

constexpr const char* kSecretWords[] = {"password", "secret", "token", "credential", "pem"};

/// Duplicate keys at any depth (YAML keeps one of them silently): one error each, at the
/// repeated key, naming the line of the first.
void checkDuplicates(Reader& r, const YAML::Node& n, const std::string& path) {
  if (n.IsMap()) {
    std::map<std::string, int> first_line;
    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>("");
      const std::string kp = Reader::join(path, key);
      const auto m = kv.first.Mark();
      const auto [it, fresh] = first_line.emplace(key, m.is_null() ? 0 : m.line + 1);
      if (!fresh)
        r.error(kv.first, kp,
                "duplicate key (first on line " + std::to_string(it->second) +
                    "; YAML would silently keep one of them)");
      checkDuplicates(r, kv.second, kp);
    }
  } else if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i)
      checkDuplicates(r, n[i], path + "[" + std::to_string(i) + "]");
  }
}

}  // namespace

std::string kafkaPropertyMessage(const std::string& key, const std::string& value,
                                 std::string message) {
  const bool secret = key.rfind("sasl.", 0) == 0 || key.rfind("ssl.", 0) == 0 ||
                      std::any_of(std::begin(kSecretWords), std::end(kSecretWords),
                                  [&](const char* w) { return key.find(w) != std::string::npos; });
  if (!secret || value.empty()) return message;
  for (std::size_t at = message.find(value); at != std::string::npos;
       at = message.find(value, at + 10))
    message.replace(at, value.size(), "<redacted>");
  return message;
}

LoadResult loadConfigString(const std::string& yaml, const std::string& file) {
  LoadResult res;
  res.config.file = file;
  res.config.text = yaml;
  Reader r(file, res.errors, res.warnings, res.service_errors);
  YAML::Node root;
  if (const auto problem = loadYaml(yaml, root)) {
    res.errors.push_back(ConfigError{file, problem->line, problem->column, "", problem->message});
    return res;
  }
  checkDuplicates(r, root, "");
  if (root.IsNull()) {
    r.error(YAML::Mark(), "",
            "empty configuration: at least one judge is needed (see config/demo.yaml)");
    return res;
  }
  if (!r.checkMap(root, "",
                  {"kafka", "events", "otlp", "sampling", "redact", "limits", "budget", "judges",
                   "tracking", "canary", "review", "ab", "admin", "sinks", "log"}))
    return res;
  Config& c = res.config;
  if (auto n = root["kafka"]) loadKafka(r, n, c.kafka);
  if (auto n = root["events"]) loadEvents(r, n, c.events);
  if (auto n = root["otlp"]) loadOtlp(r, n, c.otlp);
  if (!readsTraces(c.kafka.format) && root["otlp"])
    r.inert(root["otlp"], "otlp",
            std::string("kafka.format is ") +
                kEventFormatNames[static_cast<std::size_t>(c.kafka.format)]);
  if (readsTraces(c.kafka.format) && root["events"])
    r.inert(root["events"], "events",
            "kafka.format reads OpenTelemetry traces: the otlp section maps them");
  if (auto n = root["sampling"]) loadSampling(r, n, c.sampling);
  if (auto n = root["redact"]) loadRedact(r, n, c.redact);
  if (auto n = root["limits"]) loadLimits(r, n, c.limits);
  if (auto n = root["budget"]) loadBudget(r, n, c.budget);
  if (c.budget.key_prefix.empty()) {  // one ledger per consumer group (docs/configuration.md)
    std::string group = c.kafka.group_id;
    std::replace_if(
        group.begin(), group.end(), [](char ch) { return ch == '{' || ch == '}'; }, '_');
    c.budget.key_prefix = "assay:" + group + ":";
  }
  if (auto n = root["judges"]) loadJudges(r, n, c);
  if (auto n = root["tracking"]) loadTracking(r, n, c.tracking);
  if (auto n = root["canary"]) loadCanary(r, n, c);
  if (auto n = root["review"]) loadReview(r, n, c);
  if (auto n = root["ab"]) loadAb(r, n, c.ab);
  if (!c.ab.experiments.empty() && c.kafka.feedback_topic.empty())
    r.warn(root["ab"], "ab.experiments",
           "ratings arrive on kafka.feedback_topic, which is not set: the experiments are routed "
           "(/v1/route) but never rated, so never decided");
  if (auto n = root["admin"]) loadAdmin(r, n, c.admin);
  if (auto n = root["sinks"]) loadSinks(r, n, c.sinks);
  if (auto n = root["log"]) loadLog(r, n, c.log);
  const bool any_paid = std::any_of(c.judges.begin(), c.judges.end(), [](const JudgeConfig& j) {
    return j.factory->descriptor->cost == CostClass::kRemoteCall;
  });
  if (!any_paid && root["budget"] && c.ab.experiments.empty())
    r.inert(root["budget"], "budget", "it applies to LLM judges, and none is configured");
  if (c.judges.empty() && res.errors.empty())
    r.error(root, "judges", "no judge configured: nothing would be judged");
  return res;
}

std::string LoadResult::refusal() const {
  if (ok()) return "";
  std::string msg = config.file + " is not a valid assayd configuration:";
  for (const auto& e : errors) msg += "\n  " + e.format();
  return msg;
}

LoadResult loadConfigFile(const std::string& path) {
  std::string text;
  if (auto problem = readYamlFile(path, text)) {
    LoadResult res;
    res.config.file = path;
    res.errors.push_back(ConfigError{path, 0, 0, "", std::move(problem->message)});
    return res;
  }
  return loadConfigString(text, path);
}

}  // namespace assay
