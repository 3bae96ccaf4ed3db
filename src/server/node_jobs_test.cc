// A module's job on one whole node (node_jobs.h), on its own: what it takes of the node
// and what it is submitted as.
#include "server/node_jobs.h"

#include <gtest/gtest.h>

#include "server/testing/queue_trees.h"

namespace tessera {
namespace node_jobs_test {

constexpr const char* kQueues = R"(queues:
  - name: main
    tenant: team-a
    quota:
      gpu: 4
  - name: checks
    tenant: admin
    quota:
      gpu: 4
)";

QueueTree Tree() { return testing::TreeFromYaml(kQueues); }

// Four H100s, GPU 2 in MIG mode.
NodeSpec Node() {
  NodeSpec spec = MakeUniformNode("n1", MilliCpu(32000), MiB(256 * 1024),
                                  *GpuCatalog::Default().Find("H100-80GB"), 4,
                                  SharingMode::kExclusive);
  spec.gpus[2].mode = SharingMode::kMig;
  return spec;
}

NodeJob Request(std::string queue) {
  NodeJob job;
  job.name = "validate-n1";
  job.tenant = "admin";
  job.queue = std::move(queue);
  job.command = "nvidia-smi && echo ok";
  job.env = {{"CHECK", "gpu"}};
  job.runtime_limit = 600'000'000;
  return job;
}

TEST(NodeJobsTest, TakesTheWholeNodeAndEveryGpuNotInMigModeWhole) {
  const NodeSpec spec = Node();
  const NodeLedger ledger(&spec, GpuCatalog::Default());
  const QueueTree tree = Tree();
  const NodeJobStart start = PlanNodeJob(NodeId(3), spec, ledger, Request("checks"), tree, 7'000);

  EXPECT_EQ(start.allocation.node, NodeId(3));
  EXPECT_EQ(start.allocation.cpu, MilliCpu(32000));
  EXPECT_EQ(start.allocation.memory, MiB(256 * 1024));
  ASSERT_EQ(start.allocation.gpus.size(), 3u);
  const int want[] = {0, 1, 3};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(start.allocation.gpus[i].gpu, want[i]);
    EXPECT_EQ(start.allocation.gpus[i].milli, kWholeGpu);
  }
  const JobSubmission& sub = start.submission;
  ASSERT_EQ(sub.spec.tasks.size(), 1u);
  EXPECT_EQ(sub.spec.tasks[0].cpu, MilliCpu(32000));
  EXPECT_EQ(sub.spec.tasks[0].memory, MiB(256 * 1024));
  EXPECT_EQ(sub.spec.tasks[0].gpu_count, 3);
  EXPECT_EQ(sub.spec.tasks[0].gpu_milli, kWholeGpu);
  EXPECT_EQ(sub.spec.queue, "checks");
  EXPECT_EQ(sub.spec.user, "admin");
  EXPECT_EQ(sub.spec.name, "validate-n1");
  EXPECT_FALSE(sub.spec.preemptible);
  EXPECT_EQ(sub.spec.runtime_limit, 600'000'000);
  EXPECT_EQ(sub.spec.submit_time, 7'000);
  EXPECT_EQ(sub.command, (std::vector<std::string>{"/bin/sh", "-c", "nvidia-smi && echo ok"}));
  EXPECT_EQ(sub.env.at("CHECK"), "gpu");
  EXPECT_TRUE(sub.hold_if_unfit);
}

TEST(NodeJobsTest, AnUnknownOrMissingQueueIsTheTreesFirst) {
  const NodeSpec spec = Node();
  const NodeLedger ledger(&spec, GpuCatalog::Default());
  const QueueTree tree = Tree();
  EXPECT_EQ(PlanNodeJob(NodeId(0), spec, ledger, Request(""), tree, 0).submission.spec.queue,
            "main");
  EXPECT_EQ(PlanNodeJob(NodeId(0), spec, ledger, Request("gone"), tree, 0).submission.spec.queue,
            "main");
}

TEST(NodeJobsTest, ANodeWithoutGpusTakesNone) {
  NodeSpec spec = Node();
  spec.gpus.clear();
  const NodeLedger ledger(&spec, GpuCatalog::Default());
  const NodeJobStart start = PlanNodeJob(NodeId(0), spec, ledger, Request("main"), Tree(), 0);
  EXPECT_TRUE(start.allocation.gpus.empty());
  EXPECT_EQ(start.submission.spec.tasks[0].gpu_count, 0);
  EXPECT_EQ(start.submission.spec.tasks[0].gpu_milli, MilliGpu(0));
}

}  // namespace node_jobs_test
}  // namespace tessera
