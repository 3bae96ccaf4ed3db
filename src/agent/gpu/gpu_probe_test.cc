#include "agent/gpu/gpu_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "agent/gpu/fake_gpus.h"
#include "agent/gpu/nvml_backend.h"

namespace tessera {
namespace {

GpuProbeOptions NoSleep(int samples, bool mig) {
  GpuProbeOptions o;
  o.samples = samples;
  o.mig_check = mig;
  o.sleep = [](std::chrono::milliseconds) {};
  return o;
}

TEST(GpuProbeTest, ReportsInventoryAndEverySample) {
  auto backend = MakeFakeGpuBackend("2xH100-80GB", GpuCatalog::Default(), "n1");
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto report = RunGpuProbe(**backend, GpuCatalog::Default(), NoSleep(3, false));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const nlohmann::json& r = *report;
  ASSERT_EQ(r["gpus"].size(), 2u);
  EXPECT_EQ(r["gpus"][1]["index"], 1);
  EXPECT_EQ(r["gpus"][0]["model"], "H100-80GB");
  ASSERT_EQ(r["samples"].size(), 3u);
  EXPECT_EQ(r["samples"][2].size(), 2u);
  EXPECT_TRUE(r["mig_check"].empty());
  EXPECT_TRUE(r["ok"].get<bool>());
}

TEST(GpuProbeTest, MigCheckCreatesAndDestroysOnlyOnMigGpus) {
  auto backend = MakeFakeGpuBackend("1xA100-80GB:mig,1xA100-80GB", GpuCatalog::Default(), "n1");
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto report = RunGpuProbe(**backend, GpuCatalog::Default(), NoSleep(1, true));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const nlohmann::json& mig = (*report)["mig_check"];
  ASSERT_EQ(mig.size(), 2u);
  EXPECT_EQ(mig[0]["profile"], "1g.10gb");
  EXPECT_TRUE(mig[0]["created"].get<bool>());
  EXPECT_TRUE(mig[0]["visible"].get<bool>());
  EXPECT_TRUE(mig[0]["destroyed"].get<bool>());
  EXPECT_TRUE(mig[0]["gone"].get<bool>());
  EXPECT_TRUE(mig[1].contains("skipped"));  // not in MIG mode: left alone
  EXPECT_FALSE(mig[1].contains("created"));
  EXPECT_TRUE((*report)["ok"].get<bool>());
  // Nothing is left behind.
  auto gpus = (*backend)->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE((*gpus)[0].mig_instances.empty());
}

TEST(GpuProbeTest, FullGpuIsSkippedNotTouched) {
  auto backend = MakeFakeGpuBackend("1xA100-80GB:mig", GpuCatalog::Default(), "n1");
  ASSERT_TRUE(backend.ok());
  ASSERT_TRUE((*backend)->CreateMigInstance(0, "7g.80gb", 0).ok());
  auto report = RunGpuProbe(**backend, GpuCatalog::Default(), NoSleep(1, true));
  ASSERT_TRUE(report.ok());
  const nlohmann::json& mig = (*report)["mig_check"];
  ASSERT_EQ(mig.size(), 1u);
  EXPECT_TRUE(mig[0].contains("skipped"));
  auto gpus = (*backend)->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0].mig_instances.size(), 1u);
}

TEST(GpuProbeTest, RejectsZeroSamples) {
  auto backend = MakeFakeGpuBackend("1xH100-80GB", GpuCatalog::Default(), "n1");
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ(RunGpuProbe(**backend, GpuCatalog::Default(), NoSleep(0, false)).status().code(),
            StatusCode::kInvalidArgument);
}

// The same probe through the NVML backend, on the fake libnvidia-ml.
TEST(GpuProbeTest, WorksThroughNvml) {
  setenv("FAKE_NVML_SPEC", "1xA100-SXM4-80GB:mig,1xH100-80GB", 1);
  unsetenv("FAKE_NVML_OPTIONS");
  NvmlBackendOptions opts;
  opts.library = TESSERA_FAKE_NVML_PATH;
  auto backend = LoadNvmlBackend(GpuCatalog::Default(), opts);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto report = RunGpuProbe(**backend, GpuCatalog::Default(), NoSleep(2, true));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const nlohmann::json& r = *report;
  ASSERT_EQ(r["gpus"].size(), 2u);
  EXPECT_EQ(r["samples"][1][1]["util_pct"], 11);  // the fake reads 10 + k %
  ASSERT_EQ(r["mig_check"].size(), 2u);
  EXPECT_TRUE(r["mig_check"][0]["gone"].get<bool>()) << r["mig_check"][0].dump();
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  backend->reset();
  unsetenv("FAKE_NVML_SPEC");
}

}  // namespace
}  // namespace tessera
