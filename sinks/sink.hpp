#pragma once
/// Sinks receive every judged event. Delivery is acknowledged through a shared token: the
/// Kafka offset of the event is stored only once every sink has released its copy of the token
/// (written to the file, or acknowledged by the broker), which gives at-least-once delivery.

#include <memory>
#include <span>
#include <string>

#include "core/judgment.hpp"

namespace assay {

/// Dropping the last copy marks the event finished (see sources/offset_tracker.hpp).
using DeliveryToken = std::shared_ptr<void>;

class Sink {
 public:
  virtual ~Sink() = default;
  virtual std::string_view name() const = 0;
  /// Writes one judgment; `json` is `toJson(j)`. Keeps `token` until the data is safe
  /// (a synchronous sink simply lets it go). Never throws; failures are counted.
  virtual void write(const Judgment& j, const std::string& json, DeliveryToken token) = 0;
  /// One judgment of a batch: its JSON (`toJson(*judgment)`) and its token.
  struct Record {
    const Judgment* judgment;
    const std::string* json;
    DeliveryToken token;
  };
  /// Writes `records` in order, as many write() calls would (the sink queue hands over what
  /// waited, at most kMaxBatch records). A sink that can write them in one go (one write(2) for
  /// the JSON Lines file) overrides it. Never throws; failures are counted per record.
  virtual void writeBatch(std::span<Record> records) {
    for (auto& r : records) write(*r.judgment, *r.json, std::move(r.token));
  }
  static constexpr std::size_t kMaxBatch = 256;
  /// Pushes buffered data out (file: fflush + fsync; Kafka: wait for acknowledgements).
  virtual void flush() = 0;
  /// Reopens what the sink writes to by name (SIGHUP, after logrotate moved the file).
  /// Never throws; on failure the sink keeps writing where it did and logs why.
  virtual void reopen() {}
};

}  // namespace assay
