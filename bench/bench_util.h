// Shared by the printing benchmarks (submit_bench, api_isolation_bench): the clock
// they time with and latency percentiles.
// Thread safety: stateless functions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tessera::bench {

using Clock = std::chrono::steady_clock;

// The p-quantile (0 <= p <= 1) of `v` by the nearest lower rank; 0 for no samples.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace tessera::bench
