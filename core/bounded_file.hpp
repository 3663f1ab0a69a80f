#pragma once
/// Reading a file an operator names (a configuration file, a bakeoff file, a JSON Schema, a
/// secret file) as hostile input: a FIFO, a device or a huge file must fail with a message, never
/// block, never abort (docs/configuration.md, "Files").

#include <cstddef>
#include <string>

namespace assay {

/// Reads the whole of `path` into `out` (replaced).
///
/// The file is opened with O_NONBLOCK (opening a FIFO with no writer does not block) and checked
/// with fstat on the open descriptor (no race with a rename): only a regular file is read. A
/// file over `max_bytes` is refused, counted from its size and again from the bytes read, so a
/// file that grows while it is read is refused too.
///
/// Returns "" on success, else the reason, naming no path (the caller names it), e.g.
/// "is a FIFO, not a regular file", "cannot be opened: No such file or directory" or "is 2.0 MiB,
/// over the 1 MiB limit".
std::string readRegularFile(const std::string& path, std::size_t max_bytes, std::string& out);

/// Largest data file a tool reads whole (bakeoff inputs, recorded outputs, usage history).
inline constexpr std::size_t kMaxDataFileBytes = std::size_t{256} << 20;

/// `bytes` for a message: "512 B", "64 KiB", "1.5 MiB".
std::string formatBytes(std::size_t bytes);

}  // namespace assay
