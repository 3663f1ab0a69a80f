#include "core/yaml_reader.hpp"

#include <sstream>

namespace assay {

std::string ConfigError::format() const {
  std::ostringstream s;
  s << file;
  if (line > 0) s << ':' << line << ':' << column;
  s << ": ";
  if (!path.empty()) s << path << ": ";
  s << message;
  return s.str();
}

}  // namespace assay
