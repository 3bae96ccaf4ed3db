// Small-file helpers: reading a whole text file (sysfs, /proc, tokens, configs), and
// writing a whole buffer to a blocking descriptor.
// Thread safety: functions, no shared state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace tessera {

// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> ReadTextFile(const std::string& path);

// Writes all `size` bytes to `fd` (a blocking descriptor), retrying interrupted and
// short writes; false on an error or a closed peer.
bool WriteAllFd(int fd, const char* data, size_t size);

}  // namespace tessera
