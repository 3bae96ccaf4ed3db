// Per-GPU default CPUs and memory: read from the queue configuration, applied to GPU
// tasks that state none, bounded by what a node offers per GPU, scaled for shares.
#include "api/queue_resource_defaults.h"

#include <gtest/gtest.h>

#include "api/queue_config.h"
#include "model/testing/test_catalog.h"

namespace tessera {
namespace {

JobSubmission ParsedForDefaults(const std::string& yaml) {
  StatusOr<JobSubmission> job = ParseJobYaml(yaml, testing::Catalog());
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSubmission{};
}

TEST(QueueResourceDefaultsTest, ATwoGpuJobWithNoRequestGetsThePerGpuDefaults) {
  JobSubmission job = ParsedForDefaults("command: [x]\nresources: {gpus: 2}\n");
  EXPECT_TRUE(job.cpu_defaulted);
  EXPECT_EQ(job.spec.tasks[0].cpu.value(), 1000);  // until the server applies defaults
  ApplyPerGpuDefaults(job, PerGpuDefaults{}, {}, testing::Catalog());
  EXPECT_EQ(job.spec.tasks[0].cpu.value(), 8000);         // 4 cores per GPU
  EXPECT_EQ(job.spec.tasks[0].memory.value(), 32 * 1024);  // 16 GiB per GPU
  EXPECT_FALSE(job.cpu_defaulted);                          // stated from now on
  // Applying again changes nothing.
  ApplyPerGpuDefaults(job, PerGpuDefaults{12000, 1024}, {}, testing::Catalog());
  EXPECT_EQ(job.spec.tasks[0].cpu.value(), 8000);
}

TEST(QueueResourceDefaultsTest, StatedRequestsAndCpuOnlyTasksAreKept) {
  JobSubmission job = ParsedForDefaults("command: [x]\nresources: {gpus: 2, cpu: 3}\n");
  ApplyPerGpuDefaults(job, PerGpuDefaults{}, {}, testing::Catalog());
  EXPECT_EQ(job.spec.tasks[0].cpu.value(), 3000);
  EXPECT_EQ(job.spec.tasks[0].memory.value(), 32 * 1024);  // memory was not stated
  JobSubmission cpu_only = ParsedForDefaults("command: [x]\n");
  ApplyPerGpuDefaults(cpu_only, PerGpuDefaults{}, {}, testing::Catalog());
  EXPECT_EQ(cpu_only.spec.tasks[0].cpu.value(), 1000);
  EXPECT_EQ(cpu_only.spec.tasks[0].memory.value(), 1024);
}

TEST(QueueResourceDefaultsTest, BoundedByTheMostANodeOffersPerGpuOfAnAllowedModel) {
  // H100 nodes give 2 cores and 8 GiB per GPU at most; A100 nodes 16 cores and 128 GiB.
  const PerGpuRoomByModel room = {{testing::Model("H100-80GB"), {2000, 8 * 1024, 16000, 64 * 1024}},
                                  {testing::Model("A100-80GB"), {16000, 128 * 1024, 128000, 1024 * 1024}}};
  JobSubmission h100 = ParsedForDefaults("command: [x]\nresources: {gpus: 4, gpu_model: H100-80GB}\n");
  ApplyPerGpuDefaults(h100, PerGpuDefaults{}, room, testing::Catalog());
  EXPECT_EQ(h100.spec.tasks[0].cpu.value(), 8000);
  EXPECT_EQ(h100.spec.tasks[0].memory.value(), 32 * 1024);
  // More GPUs than one node has (it will not fit anyway): no more than a node has in all,
  // so that its reason names the GPUs, not the CPUs.
  const PerGpuRoomByModel eight = {{testing::Model("H100-80GB"), {4000, 32 * 1024, 32000, 256 * 1024}}};
  JobSubmission sixteen = ParsedForDefaults("command: [x]\nresources: {gpus: 16}\n");
  ApplyPerGpuDefaults(sixteen, PerGpuDefaults{}, eight, testing::Catalog());
  EXPECT_EQ(sixteen.spec.tasks[0].cpu.value(), 32000);
  EXPECT_EQ(sixteen.spec.tasks[0].memory.value(), 256 * 1024);
  JobSubmission any = ParsedForDefaults("command: [x]\nresources: {gpus: 4}\n");
  ApplyPerGpuDefaults(any, PerGpuDefaults{8000, 32 * 1024}, room, testing::Catalog());
  EXPECT_EQ(any.spec.tasks[0].cpu.value(), 32000);  // the A100 nodes have room for it
  EXPECT_EQ(any.spec.tasks[0].memory.value(), 128 * 1024);
}

TEST(QueueResourceDefaultsTest, ASharePaysItsPartAndNeverLessThanOneCoreAndOneGib) {
  JobSubmission half = ParsedForDefaults("command: [x]\nresources: {gpu_fraction: 0.5}\n");
  ApplyPerGpuDefaults(half, PerGpuDefaults{}, {}, testing::Catalog());
  EXPECT_EQ(half.spec.tasks[0].cpu.value(), 2000);
  EXPECT_EQ(half.spec.tasks[0].memory.value(), 8 * 1024);
  JobSubmission tiny = ParsedForDefaults("command: [x]\nresources: {gpu_fraction: 0.1}\n");
  ApplyPerGpuDefaults(tiny, PerGpuDefaults{}, {}, testing::Catalog());
  EXPECT_EQ(tiny.spec.tasks[0].cpu.value(), 1000);
  EXPECT_EQ(tiny.spec.tasks[0].memory.value(), 1638);
}

TEST(QueueResourceDefaultsTest, QueuesNameTheirOwnAndBadValuesAreRefusedWithThePath) {
  const std::string yaml =
      "queues:\n"
      "  - {name: a, defaultCpuPerGpu: 8, defaultMemoryPerGpu: 32GiB}\n"
      "  - {name: b}\n";
  StatusOr<std::map<std::string, PerGpuDefaults>> d = QueuePerGpuDefaults(yaml);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->at("a"), (PerGpuDefaults{8000, 32 * 1024}));
  EXPECT_EQ(d->at("b"), PerGpuDefaults{});
  EXPECT_TRUE(ParseQueueTreeText(yaml, testing::Catalog()).ok());
  StatusOr<QueueTreeSpec> bad =
      ParseQueueTreeText("queues:\n  - {name: a, defaultCpuPerGpu: -2}\n", testing::Catalog());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("queues[0].defaultCpuPerGpu"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(
      ParseQueueTreeText("queues:\n  - {name: a, defaultMemoryPerGpu: lots}\n", testing::Catalog()).ok());
}

}  // namespace
}  // namespace tessera
