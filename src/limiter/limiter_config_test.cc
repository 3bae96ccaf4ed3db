#include "limiter/limiter_config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tessera_limiter {
namespace {

// ParseLimiterConfig takes a plain function pointer; tests feed it this table.
std::map<std::string, std::string>* g_env = nullptr;
const char* Lookup(const char* name) {
  const auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

LimiterConfig Parse(std::map<std::string, std::string> env) {
  g_env = &env;
  LimiterConfig config = ParseLimiterConfig(&Lookup);
  g_env = nullptr;
  return config;
}

TEST(LimiterConfigTest, NothingSetLimitsNothing) {
  const LimiterConfig config = Parse({});
  EXPECT_TRUE(config.ok());
  EXPECT_FALSE(config.caps_memory());
  EXPECT_FALSE(config.paces());
  EXPECT_EQ(config.real_library, "libcuda.so.1");
  EXPECT_EQ(config.log_path, "");
}

TEST(LimiterConfigTest, ReadsEveryVariable) {
  const LimiterConfig config = Parse({{"TESSERA_CUDA_MEMORY_LIMIT_MIB", "20480"},
                                      {"TESSERA_CUDA_COMPUTE_PERCENT", "25"},
                                      {"TESSERA_CUDA_LIMITER_LOG", "limiter.log"},
                                      {"TESSERA_CUDA_REAL_LIBRARY", "/opt/libcuda.so.1"}});
  ASSERT_TRUE(config.ok()) << config.error;
  EXPECT_EQ(config.memory_limit_bytes, 20480ULL << 20);
  EXPECT_EQ(config.compute_percent, 25);
  EXPECT_TRUE(config.paces());
  EXPECT_EQ(config.log_path, "limiter.log");
  EXPECT_EQ(config.real_library, "/opt/libcuda.so.1");
}

TEST(LimiterConfigTest, ZeroMemoryAndFullComputeMeanNoLimit) {
  const LimiterConfig config =
      Parse({{"TESSERA_CUDA_MEMORY_LIMIT_MIB", "0"}, {"TESSERA_CUDA_COMPUTE_PERCENT", "100"}});
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(config.caps_memory());
  EXPECT_FALSE(config.paces());
}

TEST(LimiterConfigTest, MalformedValuesAreErrorsNamingTheVariable) {
  for (const char* bad : {"", "20GiB", "-1", " 20", "1.5", "99999999999999999999"}) {
    const LimiterConfig config = Parse({{"TESSERA_CUDA_MEMORY_LIMIT_MIB", bad}});
    EXPECT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.error.find("TESSERA_CUDA_MEMORY_LIMIT_MIB='" + std::string(bad) + "'"),
              std::string::npos)
        << config.error;
  }
  for (const char* bad : {"0", "101", "25%", "", "abc"}) {
    const LimiterConfig config = Parse({{"TESSERA_CUDA_COMPUTE_PERCENT", bad}});
    EXPECT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.error.find("TESSERA_CUDA_COMPUTE_PERCENT"), std::string::npos);
  }
  EXPECT_FALSE(Parse({{"TESSERA_CUDA_REAL_LIBRARY", ""}}).ok());
}

}  // namespace
}  // namespace tessera_limiter
