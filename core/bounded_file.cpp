#include "core/bounded_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace assay {

namespace {

const char* fileType(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string formatBytes(std::size_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const double kib = static_cast<double>(bytes) / 1024.0;
  char buf[32];
  if (kib < 1024)
    std::snprintf(buf, sizeof buf, bytes % 1024 ? "%.1f KiB" : "%.0f KiB", kib);
  else
    std::snprintf(buf, sizeof buf, bytes % (std::size_t{1} << 20) ? "%.1f MiB" : "%.0f MiB",
                  kib / 1024.0);
  return buf;
}

std::string readRegularFile(const std::string& path, std::size_t max_bytes, std::string& out) {
  out.clear();
  const Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) return std::string("cannot be opened: ") + std::strerror(errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return std::string("cannot be examined: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return std::string("is ") + fileType(st.st_mode) + ", not a regular file";
  const auto over = [&] { return "is over the " + formatBytes(max_bytes) + " limit"; };
  if (static_cast<unsigned long long>(st.st_size) > max_bytes)
    return "is " + formatBytes(static_cast<std::size_t>(st.st_size)) + ", over the " +
           formatBytes(max_bytes) + " limit";
  // Room for the size fstat gave (and a little more, for a file that grows), growing by
  // doubling up to max_bytes + 1: a small file costs its size, not the limit's.
  out.resize(std::min<std::size_t>(max_bytes + 1, static_cast<std::size_t>(st.st_size) + 4096));
  std::size_t got = 0;
  while (got < out.size() || out.size() <= max_bytes) {
    if (got == out.size()) out.resize(std::min(max_bytes + 1, out.size() * 2));
    const ssize_t n = ::read(f.fd, out.data() + got, out.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      out.clear();
      return std::string("cannot be read: ") + std::strerror(errno);
    }
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  if (got > max_bytes) {
    out.clear();
    return over();
  }
  return "";
}

}  // namespace assay
