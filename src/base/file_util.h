// Small-file helpers: reading a whole text file (sysfs, /proc, tokens, configs).
// Thread safety: functions, no shared state.
#pragma once

#include <optional>
#include <string>

namespace tessera {

// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> ReadTextFile(const std::string& path);

}  // namespace tessera
