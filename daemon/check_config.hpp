#pragma once
/// `assayd --check-config FILE`: everything start-up would refuse about a configuration, without
/// starting anything. The loader's checks (every key, every judge's options through its factory),
/// the baseline file's content, and both Kafka clients built as start-up builds them
/// (sources/kafka.hpp, checkKafkaClients).

#include <iosfwd>
#include <string>
#include <vector>

#include "config/loader.hpp"

namespace assay {

/// What start-up would refuse beyond the loader's checks, for a loaded configuration: a Kafka
/// property librdkafka refuses, an unreadable baseline file, a JSON Lines path that cannot be
/// created or written, an admin host that does not resolve. assayd runs these at start-up too
/// and exits 2 on any (a restart would not fix them).
std::vector<ConfigError> startupErrors(const Config& config);

/// The loader's errors and, when the file could be read (YAML that parses), startupErrors of
/// the sections that loaded, in file order (errors without a position last): what start-up
/// and --check-config both report in one round. Empty = valid.
std::vector<ConfigError> configErrors(const LoadResult& res);

/// Prints every error and warning as FILE:LINE:COLUMN: key: message to `err`, and
/// "FILE: OK (N judges)" to `out` when there is no error. Returns the exit code: 0, or 2.
int checkConfig(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace assay
