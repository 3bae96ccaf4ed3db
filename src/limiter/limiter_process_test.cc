// The limiter in real processes: the test client runs with LD_PRELOAD=limiter against
// the fake libcuda.so.1 (one 80 GiB GPU), finding entry points by dlsym and through
// cuGetProcAddress as the CUDA runtime does, and by the ways around them: dlvsym, the
// C library's own dlsym, a driver dlmopen'ed into a namespace of its own, and a
// program that changes its limits in its environment.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "limiter/testing/child_process.h"
#include "limiter/testing/limiter_env.h"

namespace tessera_limiter_testing {
namespace {

constexpr int kOutOfMemory = 2;     // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kNotInitialized = 3;  // CUDA_ERROR_NOT_INITIALIZED

std::vector<std::string> Env(const std::vector<std::string>& extra) {
  return LimiterEnv(TESSERA_LIMITER_LIBRARY, TESSERA_FAKE_LIBCUDA_DIR, extra);
}

ChildResult Client(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<std::string> argv = {TESSERA_CUDA_CLIENT};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunChild(argv, env);
}

std::string TempPath(const std::string& name) {
  return testing::TempDir() + name + "." + std::to_string(getpid());
}

// Every allocation path, found every way, is capped at 20 GiB: the 21st 1 GiB call
// fails, cuMemGetInfo says 20 GiB, a free gives the quota back.
class CapTest : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CapTest, TwentyFirstGibibyteIsRefusedAndFreesGiveBack) {
  const auto& [api, via] = GetParam();
  const ChildResult r =
      Client({"alloc", api, via, "25"}, Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=20480"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Value("allocated"), 20) << r.out;
  EXPECT_EQ(r.Value("first_failure"), 21);
  EXPECT_EQ(r.Value("failure_code"), kOutOfMemory);
  EXPECT_EQ(r.Value("info_result"), 0);
  EXPECT_EQ(r.Value("info_total_mib"), 20480);
  EXPECT_EQ(r.Value("info_free_mib"), 0);
  EXPECT_EQ(r.Value("free_one"), 0);
  EXPECT_EQ(r.Value("realloc_after_free"), 0);
  EXPECT_EQ(r.Value("after_free_total_mib"), 20480);
  EXPECT_EQ(r.Value("after_free_free_mib"), 20480);
}

INSTANTIATE_TEST_SUITE_P(AllPaths, CapTest,
                         testing::Combine(testing::Values("alloc", "pitch", "managed", "async",
                                                          "pool", "create"),
                                          testing::Values("dlsym", "procaddr", "procaddr-ptsz",
                                                          "dlvsym", "dlvsym-dlsym", "dlmopen")),
                         [](const auto& param_info) {
                           std::string name =
                               std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(LimiterProcessTest, FreeMemoryReportsTheCapMinusWhatIsHeld) {
  const ChildResult r =
      Client({"alloc", "alloc", "procaddr", "5"}, Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=20480"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Value("first_failure"), 0);
  EXPECT_EQ(r.Value("info_total_mib"), 20480);
  EXPECT_EQ(r.Value("info_free_mib"), 15 * 1024);
}

TEST(LimiterProcessTest, WithoutLimitsEverythingPassesThrough) {
  // No TESSERA_CUDA_* variable: the fake card's own 80 GiB is the limit.
  for (const bool preload : {true, false}) {
    const ChildResult r =
        Client({"alloc", "alloc", "procaddr", "85"},
               LimiterEnv(preload ? TESSERA_LIMITER_LIBRARY : "", TESSERA_FAKE_LIBCUDA_DIR, {}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.Value("first_failure"), 81) << "preload " << preload;
    EXPECT_EQ(r.Value("failure_code"), kOutOfMemory);
    EXPECT_EQ(r.Value("info_total_mib"), 80 * 1024);
    EXPECT_EQ(r.Value("info_free_mib"), 0);
    EXPECT_EQ(r.Value("after_free_free_mib"), 80 * 1024);
    EXPECT_EQ(r.err, "");
  }
}

// The limits are read as the library is loaded: a program that changes them in its
// environment before its first CUDA call keeps the ones it was started with.
TEST(LimiterProcessTest, LimitsSetByTheProgramItselfAreIgnored) {
  for (const std::string change : {"--unsetenv=TESSERA_CUDA_MEMORY_LIMIT_MIB",
                                   "--setenv=TESSERA_CUDA_MEMORY_LIMIT_MIB=0",
                                   "--putenv=TESSERA_CUDA_MEMORY_LIMIT_MIB=81920"}) {
    for (const std::string via : {"dlsym", "procaddr"}) {
      const ChildResult r = Client({change, "alloc", "alloc", via, "25"},
                                   Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=20480"}));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.Value("first_failure"), 21) << change << " " << via << "\n" << r.out;
      EXPECT_EQ(r.Value("info_total_mib"), 20480) << change << " " << via;
    }
  }
  // Nor does a cap set later apply to a process started without one.
  const ChildResult r = Client({"--setenv=TESSERA_CUDA_MEMORY_LIMIT_MIB=1024", "alloc", "alloc",
                                "procaddr", "3"},
                               Env({}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Value("first_failure"), 0) << r.out;
}

// The driver dlmopen'ed into a new namespace is the base namespace's while limits are
// set (CapTest: and capped); without limits dlmopen is left alone.
TEST(LimiterProcessTest, DlmopenOfTheDriverIsRoutedToTheBaseNamespaceUnderLimits) {
  const ChildResult limited =
      Client({"alloc", "alloc", "dlmopen", "3"}, Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=2048"}));
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_EQ(limited.Value("base_namespace"), 1) << limited.out;
  EXPECT_EQ(limited.Value("first_failure"), 3);
  const ChildResult free = Client({"alloc", "alloc", "dlmopen", "85"}, Env({}));
  ASSERT_EQ(free.exit_code, 0) << free.err;
  EXPECT_EQ(free.Value("base_namespace"), 0) << free.out;
  EXPECT_EQ(free.Value("first_failure"), 81);
  EXPECT_EQ(free.Value("info_total_mib"), 80 * 1024);
}

TEST(LimiterProcessTest, ExplicitRealLibraryAndLogFile) {
  const std::string log = TempPath("limiter-log");
  unlink(log.c_str());
  const ChildResult r =
      Client({"alloc", "alloc", "dlsym", "3"},
             Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=2048", "TESSERA_CUDA_LIMITER_LOG=" + log,
                  std::string("TESSERA_CUDA_REAL_LIBRARY=") + TESSERA_FAKE_LIBCUDA_DIR +
                      "/libcuda.so.1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Value("first_failure"), 3);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("memory cap 2048 MiB, compute 100%"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("cuMemAlloc of 1073741824 bytes refused: 2147483648 of 2147483648"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("exit: device memory held 0 of 2147483648 bytes"), std::string::npos)
      << text.str();
  unlink(log.c_str());
}

TEST(LimiterProcessTest, TwoCappedProcessesTogetherFitTheCard) {
  // Two 40 GiB shares on one 80 GiB fake card, each trying for 50 GiB while the other
  // holds its memory: each stops at its cap and the card is exactly full, never over.
  const std::string state = TempPath("fake-gpu-state");
  unlink(state.c_str());
  const std::vector<std::string> env =
      Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=40960", "TESSERA_FAKE_CUDA_STATE=" + state});
  HeldChild a({TESSERA_CUDA_CLIENT, "hold", "50"}, env);
  HeldChild b({TESSERA_CUDA_CLIENT, "hold", "50"}, env);
  const ChildResult ra = a.WaitReady("stop_code");
  const ChildResult rb = b.WaitReady("stop_code");
  EXPECT_EQ(ra.Value("allocated"), 40) << ra.out << ra.err;
  EXPECT_EQ(ra.Value("stop_code"), kOutOfMemory);
  EXPECT_EQ(rb.Value("allocated"), 40) << rb.out << rb.err;
  EXPECT_EQ(rb.Value("stop_code"), kOutOfMemory);

  const int fd = open(state.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::uint64_t used = 0;
  ASSERT_EQ(pread(fd, &used, sizeof(used), 0), static_cast<ssize_t>(sizeof(used)));
  EXPECT_EQ(used, std::uint64_t{80} << 30);
  // A third share would overbook the card: the scheduler never places it (the
  // limiter only caps each process); here the card itself refuses its first GiB.
  const ChildResult third = Client({"hold", "1"}, env);
  EXPECT_EQ(third.Value("allocated"), 0);
  EXPECT_EQ(third.Value("stop_code"), kOutOfMemory);

  EXPECT_EQ(a.Finish().exit_code, 0);
  EXPECT_EQ(b.Finish().exit_code, 0);
  ASSERT_EQ(pread(fd, &used, sizeof(used), 0), static_cast<ssize_t>(sizeof(used)));
  EXPECT_EQ(used, 0u);
  close(fd);
  unlink(state.c_str());
}

TEST(LimiterProcessTest, MalformedSettingsRefuseEveryCallAndSaySoOnce) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"TESSERA_CUDA_MEMORY_LIMIT_MIB", "20GiB"},
      {"TESSERA_CUDA_COMPUTE_PERCENT", "0"},
      {"TESSERA_CUDA_COMPUTE_PERCENT", "150"}};
  for (const auto& [name, value] : cases) {
    const ChildResult r = Client({"init"}, Env({name + "=" + value}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.Value("init"), kNotInitialized) << name << "=" << value;
    EXPECT_EQ(r.Value("alloc"), kNotInitialized);
    EXPECT_EQ(r.Value("procaddr"), kNotInitialized);
    const std::string expected = "tessera-cuda-limiter: malformed " + name + "='" + value + "'";
    EXPECT_EQ(r.err.rfind(expected, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(LimiterProcessTest, ADriverTheLimiterCannotLoadRefusesOnlyWhenLimitsAreSet) {
  // The program finds the (fake) driver; the limiter is pointed elsewhere.
  const std::string missing = "TESSERA_CUDA_REAL_LIBRARY=/nonexistent/libcuda.so.1";
  const ChildResult limited =
      Client({"init"}, Env({missing, "TESSERA_CUDA_MEMORY_LIMIT_MIB=1024"}));
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_EQ(limited.Value("init"), kNotInitialized);
  EXPECT_EQ(limited.Value("alloc"), kNotInitialized);
  const ChildResult unlimited = Client({"init"}, Env({missing}));
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.err;
  EXPECT_EQ(unlimited.Value("init"), 0);
  EXPECT_EQ(unlimited.Value("alloc"), 0);
  EXPECT_EQ(unlimited.Value("procaddr"), 0);
}

TEST(LimiterProcessTest, RtldNextStillResolvesFromTheCaller) {
  // The limiter exports dlsym; RTLD_NEXT lookups must still start after the caller.
  const ChildResult r = Client({"rtld-next"}, Env({"TESSERA_CUDA_MEMORY_LIMIT_MIB=1024"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Value("rtld_next_ok"), 1);
}

}  // namespace
}  // namespace tessera_limiter_testing
