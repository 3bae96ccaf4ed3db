#include "model/restart_policy.h"

#include <string>

namespace tessera {

std::string_view RestartOnName(RestartOn cause) {
  switch (cause) {
    case RestartOn::kFailure:
      return "failure";
    case RestartOn::kNodeLost:
      return "node-lost";
    case RestartOn::kGpuFault:
      return "gpu-fault";
  }
  return "";
}

std::string RestartOnNames(uint8_t on) {
  std::string out;
  for (RestartOn c : {RestartOn::kFailure, RestartOn::kNodeLost, RestartOn::kGpuFault}) {
    if ((on & static_cast<uint8_t>(c)) != 0) {
      out += (out.empty() ? "" : ", ") + std::string(RestartOnName(c));
    }
  }
  return out;
}

}  // namespace tessera
