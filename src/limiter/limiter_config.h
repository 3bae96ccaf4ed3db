// The limiter's configuration, read from the environment the agent gives a task:
//   TESSERA_CUDA_MEMORY_LIMIT_MIB  device memory this process may hold, in MiB
//                                  (absent or 0: no memory cap)
//   TESSERA_CUDA_COMPUTE_PERCENT   share of GPU time for kernels, 1..100
//                                  (absent or 100: no pacing)
//   TESSERA_CUDA_LIMITER_LOG       file for one-line diagnostics (absent: silent)
//   TESSERA_CUDA_REAL_LIBRARY      the real driver to load (absent: libcuda.so.1)
// A malformed value is an error, never "unlimited": the caller then refuses every
// CUDA call. Pure functions, no global state.
#ifndef TESSERA_LIMITER_LIMITER_CONFIG_H_
#define TESSERA_LIMITER_LIMITER_CONFIG_H_

#include <cstdint>
#include <string>

namespace tessera_limiter {

struct LimiterConfig {
  std::uint64_t memory_limit_bytes = 0;  // 0: no cap
  int compute_percent = 100;             // 100: no pacing
  std::string log_path;                  // empty: no log
  std::string real_library = "libcuda.so.1";
  // Non-empty when a variable is malformed: "NAME='value': why".
  std::string error;

  bool ok() const { return error.empty(); }
  bool caps_memory() const { return memory_limit_bytes > 0; }
  bool paces() const { return compute_percent < 100; }
};

// `lookup` returns the variable's value or nullptr when it is unset (getenv's contract).
using EnvLookup = const char* (*)(const char* name);
LimiterConfig ParseLimiterConfig(EnvLookup lookup);

}  // namespace tessera_limiter

#endif  // TESSERA_LIMITER_LIMITER_CONFIG_H_
