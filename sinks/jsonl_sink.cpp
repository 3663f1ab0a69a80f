#include "sinks/jsonl_sink.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace assay {

JsonlSink::JsonlSink(const JsonlSinkOptions& options, SinkStats& stats)
    : path_(options.path), ok_(stats.writes("jsonl", true)), errors_(stats.writes("jsonl", false)) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(path_.c_str(), "ae");
  if (!file_) {
    throw std::runtime_error("sinks.jsonl.path: cannot open '" + path_ +
                             "' for appending: " + std::strerror(errno));
  }
}

JsonlSink::~JsonlSink() {
  if (file_) {
    flush();
    std::fclose(file_);
  }
}

void JsonlSink::write(const Judgment&, const std::string& json, DeliveryToken) {
  std::lock_guard lock(mu_);
  const bool ok = std::fwrite(json.data(), 1, json.size(), file_) == json.size() &&
                  std::fputc('\n', file_) != EOF && std::fflush(file_) == 0;
  if (ok) {
    ok_.Increment();
  } else {
    errors_.Increment();
    static std::atomic<int> logged{0};
    if (logged++ < 10)
      spdlog::error("jsonl sink: write to '{}' failed: {}", path_, std::strerror(errno));
  }
}

void JsonlSink::flush() {
  std::lock_guard lock(mu_);
  std::fflush(file_);
  ::fsync(fileno(file_));
}

}  // namespace assay
