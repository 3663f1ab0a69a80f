#pragma once
/// JSON Lines sink: one `toJson()` object per line, appended to `path` (parent folders created).
/// Each line is handed to the kernel (fflush) before the event's delivery token is released, so
/// a crash of the daemon loses no judged event whose offset was stored; `flush()` also fsyncs.

#include <atomic>
#include <cstdio>
#include <mutex>

#include "config/options.hpp"
#include "sinks/sink.hpp"
#include "sinks/sink_stats.hpp"

namespace assay {

class JsonlSink final : public Sink {
 public:
  /// Throws std::runtime_error naming the path when it cannot be opened (start-up only).
  JsonlSink(const JsonlSinkOptions& options, SinkStats& stats);
  ~JsonlSink() override;
  std::string_view name() const override { return "jsonl"; }
  void write(const Judgment& j, const std::string& json, DeliveryToken token) override;
  void flush() override;

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::mutex mu_;
  prometheus::Counter& ok_;
  prometheus::Counter& errors_;
};

}  // namespace assay
