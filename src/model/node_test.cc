#include "model/node.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(NodeTest, UniformNodeSpreadsGpusOverNuma) {
  const GpuCatalog& c = GpuCatalog::Default();
  NodeSpec n = MakeUniformNode("n0", MilliCpu(64000), MiB(512 * 1024), *c.Find("H100-80GB"), 8,
                               SharingMode::kExclusive, 2, true);
  ASSERT_EQ(n.gpus.size(), 8U);
  EXPECT_EQ(n.gpus[0].numa_node, 0);
  EXPECT_EQ(n.gpus[3].numa_node, 0);
  EXPECT_EQ(n.gpus[4].numa_node, 1);
  EXPECT_EQ(n.gpus[7].numa_node, 1);
  EXPECT_EQ(n.gpus[5].nvlink_domain, 0);
  EXPECT_TRUE(n.Homogeneous());
  EXPECT_TRUE(ValidateNodeSpec(n, c).ok());
}

TEST(NodeTest, ValidationCatchesImpossibleSpecs) {
  const GpuCatalog& c = GpuCatalog::Default();
  NodeSpec n =
      MakeUniformNode("n0", MilliCpu(8000), MiB(1024), *c.Find("T4"), 2, SharingMode::kShared);
  EXPECT_TRUE(ValidateNodeSpec(n, c).ok());
  NodeSpec mig_on_t4 = n;
  mig_on_t4.gpus[0].mode = SharingMode::kMig;
  Status s = ValidateNodeSpec(mig_on_t4, c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("does not support MIG"), std::string::npos);
  NodeSpec bad_numa = n;
  bad_numa.gpus[1].numa_node = 3;
  EXPECT_FALSE(ValidateNodeSpec(bad_numa, c).ok());
  NodeSpec negative = n;
  negative.cpu = MilliCpu(-5);
  EXPECT_FALSE(ValidateNodeSpec(negative, c).ok());
  n.labels.push_back({"rack", "r7"});
  EXPECT_EQ(n.Label("rack"), "r7");
  EXPECT_EQ(n.Label("zone"), "");
}

TEST(NodeTest, SharingModesRoundTrip) {
  for (SharingMode m : {SharingMode::kExclusive, SharingMode::kMig, SharingMode::kShared,
                        SharingMode::kTimeslice}) {
    EXPECT_EQ(*ParseSharingMode(SharingModeName(m)), m);
  }
  EXPECT_FALSE(ParseSharingMode("mps").ok());
  EXPECT_TRUE(TakesShares(SharingMode::kTimeslice));
  EXPECT_FALSE(TakesShares(SharingMode::kExclusive));
}

TEST(NodeTest, GpuSharingTextsParseWithReplicas) {
  EXPECT_EQ(*ParseGpuSharing("timeslice=4"), (GpuSharing{SharingMode::kTimeslice, 4}));
  EXPECT_EQ(*ParseGpuSharing("timeslice:64"), (GpuSharing{SharingMode::kTimeslice, 64}));
  EXPECT_EQ(*ParseGpuSharing("shared"), (GpuSharing{SharingMode::kShared, 0}));
  EXPECT_EQ(GpuSharingText({SharingMode::kTimeslice, 8}), "timeslice=8");
  EXPECT_EQ(GpuSharingText({SharingMode::kMig, 0}), "mig");
  for (const char* bad : {"timeslice", "timeslice=1", "timeslice=65", "timeslice=x", "timeslice=",
                          "shared=2", "mps"}) {
    StatusOr<GpuSharing> parsed = ParseGpuSharing(bad);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find(bad), std::string::npos)
        << bad << ": " << parsed.status().message();
  }
}

TEST(NodeTest, TimesliceReplicasAreValidated) {
  const GpuCatalog& c = GpuCatalog::Default();
  NodeSpec n = MakeUniformNode("n0", MilliCpu(8000), MiB(1024), *c.Find("A100-80GB"), 2,
                               SharingMode::kTimeslice);
  Status s = ValidateNodeSpec(n, c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.message().find("GPU 0 is in timeslice mode with replicas 0; replicas must be in 2..64"),
      std::string::npos)
      << s.message();
  n.gpus[0].replicas = n.gpus[1].replicas = 4;
  EXPECT_TRUE(ValidateNodeSpec(n, c).ok());
  n.gpus[1].mode = SharingMode::kShared;
  s = ValidateNodeSpec(n, c);
  EXPECT_NE(s.message().find("GPU 1 is in shared mode; replicas are for timeslice GPUs only"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tessera
