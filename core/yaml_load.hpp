#pragma once
/// The one way assay reads a YAML file (the daemon's configuration, a bakeoff file, a SIGHUP
/// reload): bounded in bytes, UTF-8 checked, aliases bounded (docs/configuration.md, "Files").

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <optional>
#include <string>

namespace assay {

/// Largest configuration or bakeoff file read: 1 MiB (the shipped examples are under 20 KiB).
inline constexpr std::size_t kMaxConfigBytes = 1 << 20;

/// Most nodes one YAML document may hold once every alias is counted as the nodes it repeats
/// (a "billion laughs" file of 1 KiB expands to 10^9). The example configuration holds about 600.
inline constexpr std::size_t kMaxYamlNodes = 100'000;

/// Why a file could not be read as YAML: where (1-based line and column, 0 when the problem is
/// the file itself) and what.
struct YamlProblem {
  int line = 0;
  int column = 0;
  std::string message;
};

/// Parses the first document of `text` into `root`. Before the tree is built, the text must be
/// well-formed UTF-8 (the problem names the line and column of the first bad byte) and its
/// expanded node count at most kMaxYamlNodes. A YAML syntax error (yaml-cpp's, which also refuses
/// an escape of half a surrogate pair and nesting deeper than 2,000) comes back with its mark.
/// Never throws.
std::optional<YamlProblem> loadYaml(const std::string& text, YAML::Node& root);

/// Reads `path` (a regular file of at most kMaxConfigBytes, core/bounded_file.hpp) into
/// `text`. Returns the problem (line 0) or nullopt.
std::optional<YamlProblem> readYamlFile(const std::string& path, std::string& text);

}  // namespace assay
