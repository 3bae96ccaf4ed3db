#include "api/restart_policy.h"

#include <string>

namespace tessera {

StatusOr<uint8_t> ParseRestartOnList(std::string_view text, std::string_view field) {
  uint8_t on = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) {
      comma = text.size();
    }
    std::string_view name = text.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    bool known = false;
    for (RestartOn c : {RestartOn::kFailure, RestartOn::kNodeLost, RestartOn::kGpuFault}) {
      if (name == RestartOnName(c)) {
        on |= static_cast<uint8_t>(c);
        known = true;
      }
    }
    if (!known && !(name.empty() && text.find_first_not_of(" ,") == std::string_view::npos)) {
      return InvalidArgumentError(std::string(field) + ": expected failure, node-lost or " +
                                  "gpu-fault, got '" + std::string(name.substr(0, 64)) + "'");
    }
    start = comma + 1;
  }
  if (on == 0) {
    return InvalidArgumentError(std::string(field) +
                                ": must name at least one of failure, node-lost, gpu-fault");
  }
  return on;
}

}  // namespace tessera
