#include "sources/json_format.hpp"

#include <fmt/format.h>

namespace assay {
namespace {

class JsonFormat final : public InputFormat {
 public:
  explicit JsonFormat(const Config& config)
      : parser_(config.events, config.limits.max_event_bytes) {}

  Read read(const Message& m, const Screen& screen, std::vector<DecodedEvent>& out) override {
    DecodedEvent d;
    d.screen = screen(m.key);
    if (d.screen->rejected) return {true, {}, false, true};  // not sampled: never parsed
    const std::string fallback_id =
        d.screen->hash ? std::string(m.key)
                       : fmt::format("{}/{}/{}", m.topic, m.at.partition, m.at.offset);
    Event event;
    const ParseOutcome po = parser_.parse(m.payload, fallback_id, event);
    if (!po.ok) return {false, po, false};
    d.event = std::move(event);
    out.push_back(std::move(d));
    return {};
  }

  void setExtra(const std::vector<std::string>& pointers) override { parser_.setExtra(pointers); }

  bool encodeLine(const std::string& line, std::string& key, std::string& value,
                  std::string& /*error*/) const override {
    key = parser_.extractId(line);  // no key when the line has no id or is not JSON
    value = line;
    return true;
  }

 private:
  EventParser parser_;
};

}  // namespace

std::unique_ptr<InputFormat> makeJsonFormat(const Config& config, prometheus::Registry&) {
  return std::make_unique<JsonFormat>(config);
}

}  // namespace assay
