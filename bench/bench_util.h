// Shared by the printing benchmarks (submit_bench, api_isolation_bench and others): the
// clock they time with, latency percentiles and the process's resident memory.
// Thread safety: stateless functions.
#pragma once

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <string>
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

// Resident set size in MiB (VmRSS), after returning freed memory to the system.
inline double RssMib() {
  malloc_trim(0);
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::atof(line.c_str() + 6) / 1024.0;
    }
  }
  return 0;
}

}  // namespace tessera::bench
