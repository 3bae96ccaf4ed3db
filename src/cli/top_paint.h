// `tessera top`'s colours, shared by its frame renderer (top_command.cc) and its live
// mode (top_live.cc).
// Thread safety: values.
#pragma once

#include <string>

#include "cli/top_command.h"

namespace tessera::top_paint {

// Colours; every helper returns the text unchanged when colour is off.
class Paint {
 public:
  explicit Paint(bool on) : on_(on) {}
  std::string operator()(const std::string& code, const std::string& text) const {
    if (!on_ || text.empty()) {
      return text;
    }
    return "\x1b[" + code + "m" + text + "\x1b[0m";
  }
  std::string Tenant(const std::string& tenant) const {
    return (*this)(TenantColor(tenant), tenant);
  }

 private:
  bool on_;
};

constexpr const char* kBold = "1";
constexpr const char* kDim = "2";
constexpr const char* kRed = "31";
constexpr const char* kGreen = "32";
constexpr const char* kYellow = "33";
constexpr const char* kCyan = "36";

}  // namespace tessera::top_paint
