#include "daemon/check_config.hpp"

#include <ostream>

#include "config/loader.hpp"
#include "daemon/kafka.hpp"
#include "judges/tracking/tracker.hpp"

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

}  // namespace

int checkConfig(const std::string& path, std::ostream& out, std::ostream& err) {
  const auto res = loadConfigFile(path);
  for (const auto& e : res.errors) err << e.format() << "\n";
  for (const auto& w : res.warnings) err << w.format() << "\n";
  if (!res.ok()) return 2;
  const Config& c = res.config;
  if (const auto& t = c.tracking; !t.baseline_file.empty()) {
    try {  // the file's content, as the daemon will read it
      (void)loadBaselineScores(t.baseline_file, std::nullopt, std::nullopt);
    } catch (const std::exception& e) {
      err << path << ": tracking.baseline_file: " << e.what() << "\n";
      return 2;
    }
  }
  if (const std::string why = checkKafkaClients(c.kafka); !why.empty()) {
    err << kafkaError(c, "librdkafka would refuse it when assayd starts: " + why).format() << "\n";
    return 2;
  }
  out << path << ": OK (" << c.judges.size() << " judges)\n";
  return 0;
}

}  // namespace assay
