#pragma once
/// JSON Lines sink: one `toJson()` object per line, appended to `path` (parent folders created,
/// the file created 0640). Each line is handed to the kernel (one write(2)) before the event's
/// delivery token is released, so a crash of the daemon loses no judged event whose offset was
/// stored; `flush()` also fsyncs. A record is written whole or not at all: a failed write
/// (ENOSPC, EFBIG) truncates the file back to its last complete line, counts an error and logs
/// (once a minute while it fails, and when it recovers).

#include <chrono>
#include <mutex>
#include <string>

#include "config/options.hpp"
#include "sinks/sink.hpp"
#include "sinks/sink_stats.hpp"

namespace assay {

/// Why the JSON Lines file at `path` could not be appended to at start-up ("" = it can): a
/// directory, a file that is not writable, a folder that cannot be created or written, a
/// pseudo file system (/proc, /sys). Nothing is created. --check-config's test of the path.
std::string jsonlPathProblem(const std::string& path);

/// Opens `path` for appending (created with mode 0640) without blocking: a FIFO without
/// reader would block open(2) for good, so a FIFO or a socket is refused; any other kind (a
/// regular file, /dev/null) is kept in blocking mode. Returns the descriptor, or -1 with `why`
/// set ("a FIFO without reader …", strerror). The JSON Lines sink's and the review file's.
int openForAppend(const std::string& path, std::string& why);

class JsonlSink final : public Sink {
 public:
  /// Throws std::runtime_error naming the path when it cannot be opened (start-up only).
  JsonlSink(const JsonlSinkOptions& options, SinkStats& stats);
  ~JsonlSink() override;
  std::string_view name() const override { return "jsonl"; }
  void write(const Judgment& j, const std::string& json, DeliveryToken token) override;
  /// The batch's lines in one write(2) (one fstat); when it fails, the file goes back to its
  /// last complete line and each record is written on its own, so as many as fit are written.
  void writeBatch(std::span<Record> records) override;
  void flush() override;
  /// Opens `path` anew (created 0640 if logrotate moved it away) and closes the old file
  /// once the new one is open; records in progress finish in the old one.
  void reopen() override;

 private:
  bool writeAll(const char* data, std::size_t size);  // mu_ held
  void written();                                     // mu_ held: after a good write

  std::string batch_;  // the batch's lines (the queue's thread only)
  static constexpr std::size_t kKeptBuffer = std::size_t{256} << 10;  // larger: freed after use

  std::string path_;
  int fd_ = -1;
  std::mutex mu_;  // guards the file and the state below
  bool failing_ = false;
  std::chrono::steady_clock::time_point last_log_{};
  prometheus::Counter& ok_;
  prometheus::Counter& errors_;
};

}  // namespace assay
