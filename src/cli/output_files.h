// Writing report files for the `tessera sim` commands.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"

namespace tessera {

// Writes `text` to `path`; Unavailable naming the path when it cannot.
Status WriteTextFile(const std::filesystem::path& path, const std::string& text);

}  // namespace tessera
