#include "limiter/limiter_config.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tessera_limiter {
namespace {

// Decimal digits only, no sign, no spaces, no unit; nullopt beyond `max`.
std::optional<std::uint64_t> ParseUnsigned(const char* text, std::uint64_t max) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  std::uint64_t value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(*p - '0');
    if (value > max) return std::nullopt;
  }
  return value;
}

std::string Malformed(const char* name, const char* value, const char* why) {
  return std::string(name) + "='" + value + "': " + why;
}

}  // namespace

LimiterConfig ParseLimiterConfig(EnvLookup lookup) {
  LimiterConfig config;
  // 2^40 MiB (an exbibyte) is far beyond any device; anything larger is a typo.
  constexpr std::uint64_t kMaxMib = std::uint64_t{1} << 40;
  if (const char* mib = lookup("TESSERA_CUDA_MEMORY_LIMIT_MIB"); mib != nullptr) {
    const std::optional<std::uint64_t> value = ParseUnsigned(mib, kMaxMib);
    if (!value) {
      config.error = Malformed("TESSERA_CUDA_MEMORY_LIMIT_MIB", mib,
                               "expected a whole number of MiB (0 for no cap)");
      return config;
    }
    config.memory_limit_bytes = *value << 20;
  }
  if (const char* percent = lookup("TESSERA_CUDA_COMPUTE_PERCENT"); percent != nullptr) {
    const std::optional<std::uint64_t> value = ParseUnsigned(percent, 100);
    if (!value || *value == 0) {
      config.error = Malformed("TESSERA_CUDA_COMPUTE_PERCENT", percent,
                               "expected a whole percentage from 1 to 100");
      return config;
    }
    config.compute_percent = static_cast<int>(*value);
  }
  if (const char* log = lookup("TESSERA_CUDA_LIMITER_LOG"); log != nullptr) {
    config.log_path = log;
  }
  if (const char* real = lookup("TESSERA_CUDA_REAL_LIBRARY"); real != nullptr) {
    if (*real == '\0') {
      config.error = Malformed("TESSERA_CUDA_REAL_LIBRARY", real, "expected a library path");
      return config;
    }
    config.real_library = real;
  }
  return config;
}

}  // namespace tessera_limiter
