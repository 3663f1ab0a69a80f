#include "judges/secrets.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/bounded_file.hpp"

namespace assay {

std::string secretFilePath(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  if (!dir || !*dir) return path;
  std::string out(dir);
  if (out.back() != '/') out.push_back('/');
  return out + path;
}

bool isVariableName(std::string_view name) {
  return !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

std::string variableShown(std::string_view name) {
  const bool conventional =
      isVariableName(name) && std::none_of(name.begin(), name.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c));
      });
  return conventional ? std::string(name)
                      : std::string(
                            "named here (not printed: not in the upper-case form of a "
                            "variable name, it may be the secret itself)");
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
  std::string s;
  if (const auto why = readRegularFile(resolved, kMaxSecretBytes, s); !why.empty())
    throw std::runtime_error("'" + resolved + "' " + why);
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  if (s.empty()) throw SecretContentError("'" + resolved + "' is empty");
  if (s.find_first_of("\r\n") != std::string::npos)
    throw SecretContentError("'" + resolved + "' holds more than one line");
  // A control character (a NUL, an escape sequence, a BOM's neighbours from an editor) is no
  // part of a key: sent, it would be refused far from here, or end a header early.
  if (std::any_of(s.begin(), s.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return (u < 0x20 && c != '\t') || u == 0x7F;
      }))
    throw SecretContentError("'" + resolved + "' holds a control character");
  return s;
}

}  // namespace assay
