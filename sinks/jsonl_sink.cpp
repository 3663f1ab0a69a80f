#include "sinks/jsonl_sink.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace assay {

/// The JSON Lines file can be appended to: not a directory, and its folder exists and is
/// writable, or can be created (start-up creates it). Nothing is created here.
std::string jsonlPathProblem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "'" + path + "' is a directory, not a file";
  if (fs::exists(path, ec)) {
    if (const auto t = fs::status(path, ec).type();
        t == fs::file_type::fifo || t == fs::file_type::socket)
      return "'" + path + "' is a FIFO or a socket, not a file";
    return ::access(path.c_str(), W_OK) == 0 ? "" : "'" + path + "' is not writable";
  }
  fs::path dir = fs::absolute(path, ec).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec)) dir = dir.parent_path();
  if (dir.empty() || !fs::is_directory(dir, ec))
    return "cannot create '" + path + "': '" + dir.string() + "' is not a folder";
  // Root may write almost anywhere, but nothing can be created in /proc or /sys.
  if (struct statfs fs_info{};
      ::statfs(dir.c_str(), &fs_info) == 0 &&
      (fs_info.f_type == PROC_SUPER_MAGIC || fs_info.f_type == SYSFS_MAGIC))
    return "cannot create '" + path + "': '" + dir.string() + "' is a pseudo file system";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot create '" + path + "': '" + dir.string() + "' is not writable";
  return "";
}

int openForAppend(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0640);
  if (fd < 0) {
    why = errno == ENXIO ? "a FIFO without reader (a sink writes to a file)" : std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    ::close(fd);
    why = "a FIFO or a socket (a sink writes to a file)";
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

JsonlSink::JsonlSink(const JsonlSinkOptions& options, SinkStats& stats)
    : path_(options.path), ok_(stats.writes("jsonl", true)), errors_(stats.writes("jsonl", false)) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // 0640: judgments quote the monitored service's answers; not for every local user.
  std::string why;
  fd_ = openForAppend(path_, why);
  if (fd_ < 0)
    throw std::runtime_error("sinks.jsonl.path: cannot open '" + path_ + "' for appending: " + why);
}

void JsonlSink::reopen() {
  std::error_code ec;
  const auto parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::string why;
  const int fd = openForAppend(path_, why);
  if (fd < 0) {
    spdlog::error("jsonl sink: cannot reopen '{}': {}; still writing to the file already open",
                  path_, why);
    return;
  }
  int old = -1;
  {
    std::lock_guard lock(mu_);
    old = fd_;
    fd_ = fd;
  }
  ::fsync(old);
  ::close(old);
  spdlog::info("jsonl sink: reopened '{}'", path_);
}

JsonlSink::~JsonlSink() {
  if (fd_ < 0) return;
  ::fsync(fd_);
  ::close(fd_);
}

bool JsonlSink::writeAll(const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void JsonlSink::write(const Judgment&, const std::string& json, DeliveryToken) {
  std::string line;
  line.reserve(json.size() + 1);
  line.append(json).push_back('\n');
  std::lock_guard lock(mu_);
  // A record is written whole or not at all: after a failed or short write (a full disk, a
  // file size limit) the file goes back to its last complete line, so the next record never
  // lands on a half-written one.
  struct stat st {};
  const bool sized = ::fstat(fd_, &st) == 0;
  if (writeAll(line.data(), line.size())) {
    ok_.Increment();
    written();
    return;
  }
  const int error = errno;
  const bool rolled_back = sized && ::ftruncate(fd_, st.st_size) == 0;
  errors_.Increment();
  const auto now = std::chrono::steady_clock::now();
  if (!failing_ || now - last_log_ > std::chrono::minutes(1)) {
    last_log_ = now;
    spdlog::error(
        "jsonl sink: write to '{}' failed: {}; {} (judgments are counted in "
        "assay_sink_writes_total{{sink=\"jsonl\",result=\"error\"}} until it recovers)",
        path_, std::strerror(error),
        rolled_back ? "the file ends at its last complete line"
                    : "the partial line could not be removed");
  }
  failing_ = true;
}

void JsonlSink::written() {
  if (!failing_) return;
  failing_ = false;
  spdlog::info("jsonl sink: writing to '{}' again", path_);
}

void JsonlSink::writeBatch(std::span<Record> records) {
  if (records.size() == 1) {
    write(*records[0].judgment, *records[0].json, std::move(records[0].token));
    return;
  }
  batch_.clear();
  for (const auto& r : records) batch_.append(*r.json).push_back('\n');
  {
    std::lock_guard lock(mu_);
    struct stat st {};
    if (!failing_ && ::fstat(fd_, &st) == 0) {
      if (writeAll(batch_.data(), batch_.size())) {
        ok_.Increment(static_cast<double>(records.size()));
        written();
        if (batch_.capacity() > kKeptBuffer) std::string().swap(batch_);
        return;
      }
      // Back to the last complete line; the records then go one by one, each whole or not.
      if (::ftruncate(fd_, st.st_size) != 0)
        spdlog::error("jsonl sink: a failed write to '{}' could not be removed: {}", path_,
                      std::strerror(errno));
    }
  }
  // A failing file: each record on its own, each counted and rolled back as write() does.
  for (auto& r : records) write(*r.judgment, *r.json, std::move(r.token));
}

void JsonlSink::flush() {
  std::lock_guard lock(mu_);
  ::fsync(fd_);
}

}  // namespace assay
