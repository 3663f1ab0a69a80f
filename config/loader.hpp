#pragma once
/// Loads and validates the YAML configuration. Every error is collected (not just the first)
/// with its position, so `assayd --check-config` can print them all at once.

#include <string>
#include <vector>

#include "config/options.hpp"

namespace assay {

struct ConfigError {
  std::string file;
  int line = 0, column = 0;  ///< 1-based; 0 when unknown
  std::string path;          ///< dotted key path, e.g. "judges[2].rate"
  std::string message;
  /// `FILE:LINE:COLUMN: path: message`
  std::string format() const;
};

struct LoadResult {
  Config config;
  std::vector<ConfigError> errors;  ///< empty = valid
  bool ok() const { return errors.empty(); }
};

/// Reads `path`. Never throws: an unreadable file or a YAML syntax error is an error entry.
LoadResult loadConfigFile(const std::string& path);

/// Same from a string; `file` is only used in messages.
LoadResult loadConfigString(const std::string& yaml, const std::string& file);

}  // namespace assay
