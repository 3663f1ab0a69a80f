#pragma once
/// Secrets kept out of the YAML (docs/configuration.md, "Secrets"): an LLM API key, the Kafka
/// SASL password, the Redis password come from a file or an environment variable. A file named
/// by a relative path is read from $CREDENTIALS_DIRECTORY when systemd set it (the unit's
/// `LoadCredential=NAME:PATH` puts PATH's content there as NAME, readable by the service only),
/// else from the working directory.

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace assay {

/// The path a secret file is read from: `path` itself when absolute; otherwise
/// $CREDENTIALS_DIRECTORY/`path` when that variable is set and non-empty, else `path`
/// (relative to the working directory).
std::string secretFilePath(const std::string& path);

/// True when `path` is relative and $CREDENTIALS_DIRECTORY is not set: the file is meant for
/// the service's credentials, which `assayd --check-config` in a shell cannot see.
bool secretFileDeferred(const std::string& path);

/// The largest secret read: 64 KiB.
/// True when `name` can name an environment variable: a letter or '_', then letters, digits
/// and '_'. A value that cannot (an API key pasted in its place: "sk-…") is refused unprinted.
bool isVariableName(std::string_view name);

/// `name` as an error message may show it: itself in the conventional form (upper-case
/// letters, digits, '_': ASSAY_OPENAI_KEY), else "named here" with no text of it, since a
/// password pasted in its place can be a valid name ("Hunter2").
std::string variableShown(std::string_view name);

inline constexpr std::size_t kMaxSecretBytes = std::size_t{64} * 1024;

/// A secret file that was read and holds no usable secret (empty, several lines, a control
/// character): wrong for every reader, unlike a file only the service can open.
struct SecretContentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The secret in the file at secretFilePath(`path`): its content without trailing CR, LF,
/// spaces and tabs. Throws std::runtime_error naming the resolved path: "cannot read 'P': <errno
/// text>", "'P' is not a regular file" (a FIFO or a device would block), "'P' is empty", "'P'
/// is larger than 64 KiB", "'P' holds more than one line", "'P' holds a control character"
/// (below U+0020 but a tab, or DEL); the last three as SecretContentError.
std::string readSecretFile(const std::string& path);

}  // namespace assay
