#include "daemon/check_config.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <ostream>

#include "config/loader.hpp"
#include "daemon/canary.hpp"
#include "sinks/jsonl_sink.hpp"
#include "sinks/registry.hpp"
#include "sources/kafka.hpp"
#include "tracking/tracker.hpp"

namespace assay {
namespace {

/// Where a librdkafka message points: the first configured property it names, else
/// kafka.properties as a whole.
ConfigError kafkaError(const Config& c, const std::string& message) {
  ConfigError e{c.file, c.kafka.properties_line, c.kafka.properties_column, "kafka.properties",
                message};
  std::size_t first = std::string::npos;
  for (const auto& p : c.kafka.property_positions) {
    const auto at = message.find(p.key);
    if (at < first) {
      first = at;
      e.line = p.line;
      e.column = p.column;
      e.path = "kafka.properties." + p.key;
    }
  }
  return e;
}

/// The admin host resolves to an address to listen on (whether the port is free is a
/// condition of the moment, not of the file).
std::string listenProblem(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return "";
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    if (res) ::freeaddrinfo(res);
    return "cannot resolve '" + host + "': " + ::gai_strerror(rc);
  }
  // An address of this host? Binding it with port 0 tells (EADDRNOTAVAIL otherwise), without
  // taking the configured port, which may be in use by a running assayd.
  std::string why;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const bool ok = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    const int err = errno;
    ::close(fd);
    if (ok) {
      why.clear();
      break;
    }
    if (err == EADDRNOTAVAIL)
      why = "'" + host + "' is not an address of this host (" + std::strerror(err) + ")";
  }
  ::freeaddrinfo(res);
  return why;
}

/// Kafka properties that name a file librdkafka reads when it builds a client: a missing one
/// would otherwise surface as an OpenSSL error code ("x509 certificate routines::system lib").
bool namesFile(const std::string& key, const std::string& value) {
  static constexpr const char* kKeys[] = {"ssl.ca.location",       "ssl.crl.location",
                                          "ssl.key.location",      "ssl.certificate.location",
                                          "ssl.keystore.location", "sasl.kerberos.keytab"};
  if (key == "ssl.ca.location" && value == "probe") return false;  // the system's CA paths
  return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys);
}

/// Why the canary could not keep its state at `path` ("" = it can, or no path): it writes
/// PATH.tmp and renames it over PATH, so the folder must exist and be writable.
std::string stateFileProblem(const std::string& path) {
  if (path.empty()) return "";
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "'" + path + "' is a directory, not a file";
  const fs::path dir = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(dir, ec))
    return "its folder '" + dir.string() + "' does not exist (assayd does not create it)";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "its folder '" + dir.string() +
           "' is not writable by this user: " + std::strerror(errno) +
           " (the state is written to a .tmp file renamed over it)";
  return "";
}

}  // namespace

std::vector<ConfigError> startupErrors(const Config& c) {
  std::vector<ConfigError> errors;
  for (const auto& [key, value] : c.kafka.properties)
    if (namesFile(key, value) && ::access(value.c_str(), R_OK) != 0) {
      const int err = errno;
      auto e = kafkaError(c, key);
      e.message = "cannot read '" + value + "': " + std::strerror(err) +
                  (err == EACCES ? " (the service's user must be able to read it)" : "");
      errors.push_back(std::move(e));
    }
  // With a file missing, librdkafka would only repeat it, less clearly.
  if (const std::string why = errors.empty() ? checkKafkaClients(c.kafka) : ""; !why.empty())
    errors.push_back(kafkaError(c, "librdkafka would refuse it when assayd starts: " + why));
  if (const auto& t = c.tracking; !t.baseline_file.empty()) {
    try {  // the file's content, as the daemon will read it
      (void)loadBaselineScores(t.baseline_file, std::nullopt, std::nullopt);
    } catch (const std::exception& e) {
      errors.push_back({c.file, t.baseline_file_line, t.baseline_file_column,
                        "tracking.baseline_file", e.what()});
    }
  }
  if (!c.canary.file.empty()) {
    try {  // the file's content, as the daemon will read it
      (void)loadCanarySet(c.canary, c.events, c.limits.max_event_bytes);
    } catch (const std::exception& e) {
      errors.push_back({c.file, c.canary.file_line, c.canary.file_column, "canary.file", e.what()});
    }
  }
  // The file assayd appends to, or the folder it creates it in: as the JSON Lines sink's.
  if (const auto why = c.review.path.empty() ? "" : jsonlPathProblem(c.review.path); !why.empty())
    errors.push_back({c.file, 0, 0, "review.path", why});
  if (const auto why = stateFileProblem(c.canary.state_file); !why.empty())
    errors.push_back({c.file, 0, 0, "canary.state_file", why});
  for (auto& e : checkSinks(c.sinks, c.file)) errors.push_back(std::move(e));
  if (const auto why = listenProblem(c.admin.listen); !why.empty())
    errors.push_back({c.file, c.admin.listen_line, c.admin.listen_column, "admin.listen", why});
  return errors;
}

std::vector<ConfigError> configErrors(const LoadResult& res) {
  std::vector<ConfigError> errors = res.errors;
  // Each check runs on its own section, so they add to the loader's errors; a key the loader
  // refused already is not reported twice.
  if (errors.empty() || errors.front().line > 0)
    for (auto& e : startupErrors(res.config))
      if (std::none_of(res.errors.begin(), res.errors.end(),
                       [&](const ConfigError& l) { return l.path == e.path; }))
        errors.push_back(std::move(e));
  // In file order; errors without a position (a file's content, a folder) last.
  const auto key = [](const ConfigError& e) {
    return std::pair(e.line > 0 ? e.line : INT_MAX, e.column);
  };
  std::stable_sort(errors.begin(), errors.end(),
                   [&](const auto& a, const auto& b) { return key(a) < key(b); });
  return errors;
}

int checkConfig(const std::string& path, std::ostream& out, std::ostream& err) {
  const auto res = loadConfigFile(path);
  const auto errors = configErrors(res);
  for (const auto& e : errors) err << e.format() << "\n";
  for (const auto& w : res.warnings) err << w.format() << "\n";
  if (!errors.empty()) return 2;
  const auto n = res.config.judges.size();
  out << path << ": OK (" << n << (n == 1 ? " judge)\n" : " judges)\n");
  return 0;
}

}  // namespace assay
