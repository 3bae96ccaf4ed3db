// Compute pacing in real processes against the fake driver, whose kernels spin for the
// duration they are given, so kernel time is wall time. Kept short: the benchmark
// (bench/limiter_pacing_bench.cc) is the measurement; these check the share within a
// tolerant band. "steady" is measured over the second half of the run, after the
// 100 ms burst credit is spent.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "limiter/testing/child_process.h"
#include "limiter/testing/limiter_env.h"

namespace tessera_limiter_testing {
namespace {

ChildResult Launch(const std::string& api, const std::string& millis,
                   const std::vector<std::string>& extra) {
  return RunChild({TESSERA_CUDA_CLIENT, "launch", api, "procaddr", "5000", millis},
                  LimiterEnv(TESSERA_LIMITER_LIBRARY, TESSERA_FAKE_LIBCUDA_DIR, extra));
}

TEST(LimiterPacingTest, QuarterShareHoldsAQuarterOfWallTime) {
  const ChildResult r = Launch("kernel", "2000", {"TESSERA_CUDA_COMPUTE_PERCENT=25"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 25 % +- 10 % of 25 %, in per mille.
  EXPECT_GE(r.Value("steady_share_permille"), 225) << r.out;
  EXPECT_LE(r.Value("steady_share_permille"), 275) << r.out;
  // Over the whole run: the share plus the 100 ms burst and the kernels in flight when
  // it ended (2 of 5 ms), with 2 % for timer slack.
  EXPECT_LE(r.Value("kernel_us"), r.Value("wall_us") / 4 * 102 / 100 + 100'000 + 10'000) << r.out;
}

TEST(LimiterPacingTest, GraphsAndOtherLaunchKindsArePacedToo) {
  for (const std::string api : {"graph", "ex", "coop"}) {
    const ChildResult r = Launch(api, "700", {"TESSERA_CUDA_COMPUTE_PERCENT=50"});
    ASSERT_EQ(r.exit_code, 0) << api << ": " << r.err;
    EXPECT_GE(r.Value("steady_share_permille"), 400) << api << ": " << r.out;
    EXPECT_LE(r.Value("steady_share_permille"), 600) << api << ": " << r.out;
  }
}

TEST(LimiterPacingTest, ThreadsLaunchingTogetherShareOneBudget) {
  // Four threads at once: the process as a whole keeps to its share.
  const ChildResult r =
      RunChild({TESSERA_CUDA_CLIENT, "launch", "kernel", "procaddr-ptsz", "5000", "1000", "4"},
               LimiterEnv(TESSERA_LIMITER_LIBRARY, TESSERA_FAKE_LIBCUDA_DIR,
                          {"TESSERA_CUDA_COMPUTE_PERCENT=50"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(r.Value("steady_share_permille"), 400) << r.out;
  EXPECT_LE(r.Value("steady_share_permille"), 600) << r.out;
}

TEST(LimiterPacingTest, NoShareNoPacing) {
  const ChildResult r = Launch("kernel", "300", {"TESSERA_CUDA_MEMORY_LIMIT_MIB=1024"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(r.Value("steady_share_permille"), 900) << r.out;
}

}  // namespace
}  // namespace tessera_limiter_testing
