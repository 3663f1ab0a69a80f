#pragma once
/// The input formats of the events topic (kafka.format), one row of a table each
/// (docs/adding-an-input-format.md): a format turns one message into RAG events,
/// at once (assay JSON: one message, one event) or after joining several messages (OTLP: the
/// spans of one trace). The Kafka source (sources/kafka_source.hpp) reads every message through
/// the configured row; tests/sources/format_compliance_test walks every row with the shared
/// hostile corpus (docs/adding-an-input-format.md). Poll thread only, except release() (any
/// thread).

#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/options.hpp"
#include "core/event.hpp"
#include "sampling/sampler.hpp"
#include "sources/event_parser.hpp"
#include "sources/offset_tracker.hpp"

namespace assay {

/// One event a format produced, with where it came from.
struct DecodedEvent {
  /// The event; empty for a joined event that left without one (an incomplete trace counted,
  /// an evicted trace): its messages are released all the same.
  std::optional<Event> event;
  /// The sampler's key screen already computed for the message (assay JSON screens the key
  /// before parsing); empty: screen the event id.
  std::optional<KeyScreen> screen;
  /// A joined event: every message that held one of its parts; each is finished once every
  /// event holding it is (InputFormat::release). Empty: the event is the message being read.
  std::vector<MessageRef> messages;
};

class InputFormat {
 public:
  virtual ~InputFormat() = default;

  /// One consumed message of the events topic.
  struct Message {
    std::string_view payload, key;
    MessageRef at;
    std::string_view topic;  ///< for the fallback id "topic/partition/offset"
  };
  /// The sampler's first step, on a message key or an event id (Sampler::screen).
  using Screen = std::function<KeyScreen(std::string_view)>;
  struct Read {
    bool ok = true;
    ParseOutcome invalid;  ///< when !ok: why the message is not of this format
    /// The message is held by events still being assembled (a joined format): it is finished
    /// through release() once the last of them is; false: finished once `out`'s events are.
    bool held = false;
    /// The message's key alone said sampling would not admit its event: never parsed
    /// (counted as sampled out; a format that screens ids inside messages counts its own).
    bool screened_out = false;
  };
  /// Decodes one message. Events it completes (of this message or, for a joined format, of
  /// earlier ones) are appended to `out`. Never throws on message content; a message larger
  /// than limits.max_event_bytes is `too_large` in every format.
  virtual Read read(const Message& m, const Screen& screen, std::vector<DecodedEvent>& out) = 0;
  /// Events whose assembly timed out (a joined format; each poll-loop turn).
  virtual void expire(std::vector<DecodedEvent>& /*out*/) {}
  /// A joined event holding `m` is done: true when it was the last, so the message is finished.
  /// Thread-safe.
  virtual bool release(MessageRef /*m*/) { return true; }
  /// The consumer group took these partitions of the events topic away.
  virtual void forget(const std::vector<std::int32_t>& /*partitions*/) {}
  /// Events being assembled now (0 for a format without a join).
  virtual std::size_t assembling() const { return 0; }
  /// Once a second: the format's gauges.
  virtual void refresh() {}
  /// The judges' JSON Pointer inputs (Event::fields) after a reload rebuilt the judges.
  virtual void setExtra(const std::vector<std::string>& /*pointers*/) {}
  /// The start-up log line that says how the topic is read ("" = none).
  virtual std::string describe() const { return {}; }
  /// --replay: one line of a JSON Lines file as a message of this format: its key ("" = none)
  /// and value. False: the line is skipped, `error` says why.
  virtual bool encodeLine(const std::string& line, std::string& key, std::string& value,
                          std::string& error) const = 0;
};

/// One row of the format table.
struct InputFormatRow {
  EventFormat format;
  std::string_view name;  ///< its kafka.format value
  std::unique_ptr<InputFormat> (*make)(const Config& config, prometheus::Registry& registry);
  /// A JSON Lines file of real --replay lines of this format, relative to the source tree: the
  /// compliance test reads its first line back through the row.
  std::string_view example;
};

/// Every input format, in the order of EventFormat.
std::span<const InputFormatRow> inputFormats();
/// The configured format's row built (`config.kafka.format`).
std::unique_ptr<InputFormat> makeInputFormat(const Config& config, prometheus::Registry& registry);

}  // namespace assay
