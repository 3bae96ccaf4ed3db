#include "model/request.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TaskRequest Share(int64_t milli) {
  TaskRequest r;
  r.cpu = MilliCpu(4000);
  r.memory = MiB(8192);
  r.gpu_count = 1;
  r.gpu_milli = MilliGpu(milli);
  return r;
}

TEST(RequestTest, AcceptsTheFourForms) {
  const GpuCatalog& c = GpuCatalog::Default();
  TaskRequest cpu_only;
  cpu_only.cpu = MilliCpu(2000);
  EXPECT_TRUE(ValidateTaskRequest(cpu_only, c).ok());
  EXPECT_TRUE(cpu_only.cpu_only());

  TaskRequest share = Share(250);
  share.gpu_memory = MiB(20480);
  EXPECT_TRUE(ValidateTaskRequest(share, c).ok());
  EXPECT_TRUE(share.fractional());

  TaskRequest whole = Share(1000);
  whole.gpu_count = 8;
  EXPECT_TRUE(ValidateTaskRequest(whole, c).ok());
  EXPECT_TRUE(whole.whole_gpus());
  EXPECT_EQ(whole.TotalGpuMilli(c).value(), 8000);

  TaskRequest mig = Share(0);
  mig.mig_profile = "1g.10gb";
  EXPECT_TRUE(ValidateTaskRequest(mig, c).ok());
  EXPECT_EQ(mig.TotalGpuMilli(c).value(), 142);
}

TEST(RequestTest, RejectsWithActionableMessages) {
  const GpuCatalog& c = GpuCatalog::Default();
  TaskRequest r = Share(500);
  r.gpu_count = 2;
  Status s = ValidateTaskRequest(r, c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("whole GPUs"), std::string::npos);

  EXPECT_FALSE(ValidateTaskRequest(Share(1500), c).ok());
  EXPECT_FALSE(ValidateTaskRequest(Share(0), c).ok());

  TaskRequest neg = Share(500);
  neg.cpu = MilliCpu(-1);
  EXPECT_FALSE(ValidateTaskRequest(neg, c).ok());

  TaskRequest absurd = Share(1000);
  absurd.gpu_count = 100000;
  EXPECT_FALSE(ValidateTaskRequest(absurd, c).ok());

  TaskRequest bad_mig = Share(0);
  bad_mig.mig_profile = "2g.99gb";
  s = ValidateTaskRequest(bad_mig, c);
  EXPECT_NE(s.message().find("2g.99gb"), std::string::npos);

  // 1g.5gb exists on A100-40GB only; constrained to H100 it is invalid.
  TaskRequest wrong_model = Share(0);
  wrong_model.mig_profile = "1g.5gb";
  EXPECT_TRUE(ValidateTaskRequest(wrong_model, c).ok());
  wrong_model.models.Add(*c.Find("H100-80GB"));
  EXPECT_FALSE(ValidateTaskRequest(wrong_model, c).ok());

  TaskRequest cpu_with_gpu_mem;
  cpu_with_gpu_mem.gpu_memory = MiB(10);
  EXPECT_FALSE(ValidateTaskRequest(cpu_with_gpu_mem, c).ok());

  // A MIG instance has one form: its profile sizes it, so a whole-GPU share or a
  // memory cap beside the profile is refused rather than read two ways.
  TaskRequest mig_as_whole = Share(1000);
  mig_as_whole.mig_profile = "1g.10gb";
  s = ValidateTaskRequest(mig_as_whole, c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sized by its profile"), std::string::npos) << s.message();
  TaskRequest mig_with_memory = Share(0);
  mig_with_memory.mig_profile = "1g.10gb";
  mig_with_memory.gpu_memory = MiB(10240);
  EXPECT_FALSE(ValidateTaskRequest(mig_with_memory, c).ok());
}

}  // namespace
}  // namespace tessera
