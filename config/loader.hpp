#pragma once
/// Loads and validates the YAML configuration. Every error is collected (not just the first)
/// with its position, so `assayd --check-config` can print them all at once.

#include <stdexcept>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "core/yaml_reader.hpp"

namespace assay {

struct LoadResult {
  Config config;
  std::vector<ConfigError> errors;  ///< empty = valid
  /// Things worth saying that do not fail the load (e.g. an unset API key variable, a plain
  /// http:// endpoint allowed by insecure_http). Printed as warnings.
  std::vector<ConfigError> warnings;
  /// Errors only the service's environment settles: a secret file or variable (kafka.secret_*,
  /// budget.password_*) that cannot be read here. Each is also a warning; --check-config
  /// exits 0 on them, assayd refuses to start (exit 2).
  std::vector<ConfigError> service_errors;
  bool ok() const { return errors.empty(); }
  /// "PATH is not a valid assayd configuration:" and each error's FILE:LINE:COL line (for a
  /// tool that refuses the file); "" when ok().
  std::string refusal() const;
};

/// A configuration problem found after loading (a Kafka property librdkafka rejects, an API key
/// variable unset in the service's environment): assayd exits 2 on it, as for a load error.
/// Other start-up failures (a port in use, a fatal Kafka error) are run-time failures and
/// exit 1.
struct ConfigurationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// librdkafka's message about `key: value`, with the value replaced by "<redacted>" when the
/// property may hold a secret (sasl.*, ssl.*, or a name with password, secret, token,
/// credential or pem in it): a password pasted into the wrong property is never echoed.
std::string kafkaPropertyMessage(const std::string& key, const std::string& value,
                                 std::string message);

/// Reads `path`. Never throws: an unreadable file or a YAML syntax error is an error entry.
LoadResult loadConfigFile(const std::string& path);

/// Same from a string; `file` is only used in messages.
LoadResult loadConfigString(const std::string& yaml, const std::string& file);

}  // namespace assay
