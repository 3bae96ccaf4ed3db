#include "agent/gpu_share_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

using Env = std::map<std::string, std::string>;

const std::vector<SharingMode> kModes = {SharingMode::kExclusive, SharingMode::kShared,
                                         SharingMode::kMig};

TaskLaunch Share(int gpu, int64_t milli, int64_t memory_mib) {
  TaskLaunch l;
  l.gpus = {gpu};
  l.gpu_milli = milli;
  l.gpu_memory_mib = memory_mib;
  return l;
}

TEST(GpuShareEnvTest, AShareTaskGetsTheLimiterItsLimitsAndItsGpusMpsDirectories) {
  Env env = {{"LD_PRELOAD", "/opt/own.so"}};
  AddGpuShareEnv(Share(1, 250, 20480), kModes, "/data/lib/libtessera_cuda_limiter.so",
                 MpsDirs{"/data/mps/1/pipe", "/data/mps/1/log"}, &env);
  EXPECT_EQ(env, (Env{{"LD_PRELOAD", "/data/lib/libtessera_cuda_limiter.so:/opt/own.so"},
                      {"TESSERA_CUDA_MEMORY_LIMIT_MIB", "20480"},
                      {"TESSERA_CUDA_COMPUTE_PERCENT", "25"},
                      {"CUDA_MPS_PIPE_DIRECTORY", "/data/mps/1/pipe"},
                      {"CUDA_MPS_LOG_DIRECTORY", "/data/mps/1/log"}}));
}

TEST(GpuShareEnvTest, TheControllersValuesWinAndNoMemoryGrantMeansNoCap) {
  Env env = {{"TESSERA_CUDA_COMPUTE_PERCENT", "30"}};
  AddGpuShareEnv(Share(1, 250, 0), kModes, "/l.so", std::nullopt, &env);
  EXPECT_EQ(env, (Env{{"LD_PRELOAD", "/l.so"}, {"TESSERA_CUDA_COMPUTE_PERCENT", "30"}}));
  Env small;
  AddGpuShareEnv(Share(1, 5, 0), kModes, "/l.so", std::nullopt, &small);
  EXPECT_EQ(small.at("TESSERA_CUDA_COMPUTE_PERCENT"), "1");  // never 0
}

TEST(GpuShareEnvTest, WithoutTheLimiterOnlyMpsAndNothingForOtherTasks) {
  Env env;
  AddGpuShareEnv(Share(1, 500, 1024), kModes, "", MpsDirs{"/p", "/l"}, &env);
  EXPECT_EQ(env, (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/p"}, {"CUDA_MPS_LOG_DIRECTORY", "/l"}}));
  for (TaskLaunch l : {Share(0, 1000, 0), Share(2, 250, 0), Share(7, 250, 0)}) {
    Env none;
    AddGpuShareEnv(l, kModes, "/l.so", MpsDirs{"/p", "/l"}, &none);
    EXPECT_TRUE(none.empty()) << "GPU " << l.gpus[0];
  }
  TaskLaunch two = Share(1, 1000, 0);
  two.gpus = {1, 0};
  EXPECT_FALSE(IsShareTask(two, kModes));
  TaskLaunch mig = Share(1, 1000, 0);
  mig.mig.push_back(MigRequest{1, "1g.10gb", 0});
  EXPECT_FALSE(IsShareTask(mig, kModes));
  EXPECT_TRUE(IsShareTask(Share(1, 1000, 0), kModes));
}

TEST(GpuShareEnvTest, FindsTheLimiterBesideTheBinaryOrAsToldAndInstallsItForEveryUid) {
  char tmpl[] = "/tmp/tessera_share_env_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/bin");
  std::filesystem::create_directories(dir + "/lib/tessera");

  StatusOr<std::string> none = FindCudaLimiter("", dir + "/bin");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("--cuda-limiter none"), std::string::npos);
  EXPECT_EQ(*FindCudaLimiter("none", dir + "/bin"), "");
  EXPECT_EQ(FindCudaLimiter(dir + "/missing.so", dir + "/bin").status().code(),
            StatusCode::kNotFound);

  std::ofstream(dir + "/lib/tessera/libtessera_cuda_limiter.so") << "second";
  EXPECT_EQ(*FindCudaLimiter("", dir + "/bin"), dir + "/lib/tessera/libtessera_cuda_limiter.so");
  std::filesystem::create_directories(dir + "/bin/lib");
  std::ofstream(dir + "/bin/lib/libtessera_cuda_limiter.so") << "first";
  EXPECT_EQ(*FindCudaLimiter("", dir + "/bin"), dir + "/bin/lib/libtessera_cuda_limiter.so");

  ::chmod((dir + "/bin/lib/libtessera_cuda_limiter.so").c_str(), 0600);
  StatusOr<std::string> installed =
      InstallCudaLimiter(dir + "/bin/lib/libtessera_cuda_limiter.so", dir + "/data");
  ASSERT_TRUE(installed.ok()) << installed.status().ToString();
  EXPECT_EQ(*installed, dir + "/data/lib/libtessera_cuda_limiter.so");
  struct stat st {};
  ASSERT_EQ(::stat(installed->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(::stat((dir + "/data/lib").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  std::ifstream in(*installed);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "first");
  // Again (an agent restart): replaced by rename, not rewritten in place.
  const ino_t before = (::stat(installed->c_str(), &st), st.st_ino);
  ASSERT_TRUE(
      InstallCudaLimiter(dir + "/lib/tessera/libtessera_cuda_limiter.so", dir + "/data").ok());
  ASSERT_EQ(::stat(installed->c_str(), &st), 0);
  EXPECT_NE(st.st_ino, before);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace tessera
