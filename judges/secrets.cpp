#include "judges/secrets.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace assay {

std::string secretFilePath(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  if (!dir || !*dir) return path;
  std::string out(dir);
  if (out.back() != '/') out.push_back('/');
  return out + path;
}

bool secretFileDeferred(const std::string& path) {
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  return !path.empty() && path.front() != '/' && (!dir || !*dir);
}

std::string readSecretFile(const std::string& path) {
  std::error_code ec;  // messages name the absolute path: a relative one is from the cwd
  const auto absolute = std::filesystem::absolute(secretFilePath(path), ec);
  const std::string resolved = ec ? secretFilePath(path) : absolute.string();
  // A regular file only: a FIFO or a device (/dev/stdin) would block or never end.
  if (const auto st = std::filesystem::status(resolved, ec);
      !ec && st.type() != std::filesystem::file_type::regular)
    throw std::runtime_error("'" + resolved + "' is not a regular file");
  std::ifstream in(resolved, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + resolved + "': " + std::strerror(errno));
  std::string s(kMaxSecretBytes + 1, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw std::runtime_error("cannot read '" + resolved + "': I/O error");
  if (s.size() > kMaxSecretBytes)
    throw std::runtime_error("'" + resolved + "' is larger than 64 KiB");
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  if (s.empty()) throw std::runtime_error("'" + resolved + "' is empty");
  if (s.find_first_of("\r\n") != std::string::npos)
    throw std::runtime_error("'" + resolved + "' holds more than one line");
  return s;
}

}  // namespace assay
