#include "core/exposition.hpp"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace assay {

std::string serializeMetrics(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

}  // namespace assay
