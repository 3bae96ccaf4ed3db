// The CUDA limiter's compute pacing, measured: the test client runs back-to-back
// kernels under the limiter on the fake driver (kernels spin for their duration, so
// kernel time is wall time) at 10, 25, 50 and 100 %, and the achieved kernel-time
// share is printed with its relative error against the target, over the whole run
// (which includes the 100 ms burst credit) and over its second half (steady state).
// Then the launch overhead: launches per second of 1 us kernels without the limiter,
// with it but no share, and paced at 99 % (each launch timed with two events).
//
//   limiter_pacing_bench [SECONDS_PER_SHARE=3] [KERNEL_US=5000]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "limiter/testing/child_process.h"
#include "limiter/testing/limiter_env.h"

using tessera_limiter_testing::ChildResult;
using tessera_limiter_testing::LimiterEnv;
using tessera_limiter_testing::RunChild;

namespace {

ChildResult Run(const std::string& limiter, const std::vector<std::string>& extra,
                const std::string& micros, const std::string& millis) {
  return RunChild({TESSERA_CUDA_CLIENT, "launch", "kernel", "procaddr", micros, millis},
                  LimiterEnv(limiter, TESSERA_FAKE_LIBCUDA_DIR, extra), 600000);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  const std::string micros = argc > 2 ? argv[2] : "5000";
  const std::string millis = std::to_string(static_cast<long long>(seconds * 1000));
  std::printf(
      "CUDA limiter pacing on the fake driver: %s us kernels back to back, %.1f s per share\n\n",
      micros.c_str(), seconds);
  std::printf("| target | launches | share (whole run) | error | share (2nd half) | error |\n");
  std::printf("|-------:|---------:|------------------:|------:|-----------------:|------:|\n");
  int failures = 0;
  for (const int percent : {10, 25, 50, 100}) {
    const ChildResult r =
        Run(TESSERA_LIMITER_LIBRARY, {"TESSERA_CUDA_COMPUTE_PERCENT=" + std::to_string(percent)},
            micros, millis);
    if (r.exit_code != 0) {
      std::printf("| %d %% | client failed: %s |\n", percent, r.err.c_str());
      ++failures;
      continue;
    }
    const double whole =
        static_cast<double>(r.Value("kernel_us")) / static_cast<double>(r.Value("wall_us")) * 100.0;
    const double steady = static_cast<double>(r.Value("steady_kernel_us")) /
                          static_cast<double>(r.Value("steady_wall_us")) * 100.0;
    std::printf("| %d %% | %lld | %.2f %% | %+.1f %% | %.2f %% | %+.1f %% |\n", percent,
                r.Value("launches"), whole, (whole - percent) / percent * 100.0, steady,
                (steady - percent) / percent * 100.0);
  }
  std::printf("\nLaunch overhead, 1 us kernels for 1 s:\n\n");
  std::printf("| setup | launches/s | us per launch |\n|---|---:|---:|\n");
  const struct {
    const char* name;
    std::string limiter;
    std::vector<std::string> extra;
  } setups[] = {
      {"no limiter", "", {}},
      {"limiter, memory cap only", TESSERA_LIMITER_LIBRARY, {"TESSERA_CUDA_MEMORY_LIMIT_MIB=1024"}},
      {"limiter, paced at 99 %", TESSERA_LIMITER_LIBRARY, {"TESSERA_CUDA_COMPUTE_PERCENT=99"}}};
  for (const auto& setup : setups) {
    const ChildResult r = Run(setup.limiter, setup.extra, "1", "1000");
    if (r.exit_code != 0) {
      std::printf("| %s | client failed: %s |\n", setup.name, r.err.c_str());
      ++failures;
      continue;
    }
    const double per_second =
        static_cast<double>(r.Value("launches")) / (static_cast<double>(r.Value("wall_us")) / 1e6);
    std::printf("| %s | %.0f | %.2f |\n", setup.name, per_second, 1e6 / per_second);
  }
  return failures == 0 ? 0 : 1;
}
