#pragma once
/// The one YAML reader of assay's files (the daemon's configuration, config/loader.cpp; a
/// bakeoff file, cli/bakeoff/config.cpp): errors and warnings collected as FILE:LINE:COLUMN:
/// key.path: message, from yaml-cpp's marks. Each file's reader derives from it and adds its
/// keys' checks; the file itself is read and parsed by core/yaml_load.hpp.

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/edit_distance.hpp"

namespace assay {

/// One error or warning of a YAML file.
struct ConfigError {
  std::string file;
  int line = 0, column = 0;  ///< 1-based; 0 when unknown
  std::string path;          ///< dotted key path, e.g. "judges[2].rate"
  std::string message;
  /// `FILE:LINE:COLUMN: path: message` (without line and column when they are unknown), its
  /// control characters as \xNN (a key quoted from the file cannot split the line)
  std::string format() const;
};

class YamlReader {
 public:
  YamlReader(std::string file, std::vector<ConfigError>& errors, std::vector<ConfigError>& warnings)
      : file_(std::move(file)), errors_(errors), warnings_(warnings) {}

  /// The error or warning at `mark` (a null mark: no line and column).
  ConfigError at(const YAML::Mark& mark, const std::string& path, std::string message) const {
    return ConfigError{file_, mark.is_null() ? 0 : mark.line + 1,
                       mark.is_null() ? 0 : mark.column + 1, path, std::move(message)};
  }
  void error(const YAML::Mark& mark, const std::string& path, const std::string& message) {
    errors_.push_back(at(mark, path, message));
  }
  void addWarning(const YAML::Mark& mark, const std::string& path, const std::string& message) {
    warnings_.push_back(at(mark, path, message));
  }
  /// "path.key" ("key" at the top).
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  /// The known key nearest `key` by edit distance (at most 2 edits), or "" when none is.
  template <class Keys>
  static std::string nearestKey(std::string_view key, const Keys& known) {
    std::string best;
    std::size_t best_d = 3;
    for (const auto& k : known)
      if (const auto d = editDistance(key, k); d < best_d) best_d = d, best = std::string(k);
    return best;
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<ConfigError>& errors_;
  std::vector<ConfigError>& warnings_;
};

}  // namespace assay
