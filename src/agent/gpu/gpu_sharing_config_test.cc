#include "agent/gpu/gpu_sharing_config.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<DiscoveredGpu> Gpus(std::vector<SharingMode> modes) {
  std::vector<DiscoveredGpu> out;
  for (size_t i = 0; i < modes.size(); ++i) {
    DiscoveredGpu g;
    g.index = static_cast<int>(i);
    g.mode = modes[i];
    g.mig_enabled = modes[i] == SharingMode::kMig;
    out.push_back(g);
  }
  return out;
}

TEST(GpuSharingConfigTest, ParsesItemsIndicesAndRanges) {
  StatusOr<GpuSharingConfig> c = ParseGpuSharingConfig(" 0,1=shared; 2=timeslice:4 ;3-5=exclusive");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->items.size(), 3U);
  EXPECT_EQ(c->items[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c->items[0].sharing, (GpuSharing{SharingMode::kShared, 0}));
  EXPECT_EQ(c->items[1].gpus, (std::vector<int>{2}));
  EXPECT_EQ(c->items[1].sharing, (GpuSharing{SharingMode::kTimeslice, 4}));
  EXPECT_EQ(c->items[2].gpus, (std::vector<int>{3, 4, 5}));
  StatusOr<GpuSharingConfig> all = ParseGpuSharingConfig("all=timeslice=8");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->items[0].all);
  EXPECT_EQ(all->items[0].sharing.replicas, 8);
  EXPECT_TRUE(ParseGpuSharingConfig("")->empty());
}

TEST(GpuSharingConfigTest, ErrorsNameTheItem) {
  struct Case {
    const char* spec;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"0=mps", "--gpu-sharing item '0=mps': unknown sharing mode 'mps'"},
           {"0=timeslice:1",
            "--gpu-sharing item '0=timeslice:1': 'timeslice:1': timeslice needs "
            "a replica count 2..64"},
           {"0=timeslice:65", "replica count 2..64"},
           {"0=timeslice", "replica count 2..64"},
           {"1=mig", "--gpu-sharing item '1=mig': MIG mode follows the driver"},
           {"x=shared", "--gpu-sharing item 'x=shared': 'x' is not a GPU index or range"},
           {"3-1=shared", "'3-1' is not a GPU index or range"},
           {"64=shared", "'64' is not a GPU index or range"},
           {"shared", "--gpu-sharing item 'shared': expected GPUS=MODE"},
           {"0=shared;;1=shared", "has an empty item"},
           // Blanks are padding; a line break is not (a value pasted from a file).
           {"0=shared\n", "unknown sharing mode"},
           {"\n", "expected GPUS=MODE"},
       }) {
    StatusOr<GpuSharingConfig> parsed = ParseGpuSharingConfig(c.spec);
    ASSERT_FALSE(parsed.ok()) << c.spec;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << c.spec << ": " << parsed.status().message();
  }
}

TEST(GpuSharingConfigTest, AppliesModesLaterItemsWin) {
  std::vector<DiscoveredGpu> gpus = Gpus({SharingMode::kExclusive, SharingMode::kExclusive,
                                          SharingMode::kExclusive, SharingMode::kMig});
  GpuSharingConfig c = *ParseGpuSharingConfig("all=shared;2=timeslice:4");
  EXPECT_TRUE(ApplyGpuSharingConfig(c, &gpus).empty());
  EXPECT_EQ(gpus[0].mode, SharingMode::kShared);
  EXPECT_EQ(gpus[1].mode, SharingMode::kShared);
  EXPECT_EQ(gpus[2].mode, SharingMode::kTimeslice);
  EXPECT_EQ(gpus[2].replicas, 4);
  EXPECT_EQ(gpus[3].mode, SharingMode::kMig);  // "all" leaves MIG GPUs alone
  // Back to exclusive clears the replicas.
  c = *ParseGpuSharingConfig("0-2=exclusive");
  EXPECT_TRUE(ApplyGpuSharingConfig(c, &gpus).empty());
  EXPECT_EQ(gpus[2].mode, SharingMode::kExclusive);
  EXPECT_EQ(gpus[2].replicas, 0);
}

TEST(GpuSharingConfigTest, MigGpusAndMissingGpusAreReportedAndLeftAsReported) {
  std::vector<DiscoveredGpu> gpus =
      Gpus({SharingMode::kExclusive, SharingMode::kExclusive, SharingMode::kMig});
  GpuSharingConfig c = *ParseGpuSharingConfig("0,2=shared;5=timeslice:2;2=exclusive");
  std::vector<std::string> problems = ApplyGpuSharingConfig(c, &gpus);
  ASSERT_EQ(problems.size(), 3U);
  EXPECT_EQ(problems[0],
            "--gpu-sharing item '0,2=shared': GPU 2 is in MIG mode; MPS and time-slicing are not "
            "available on MIG instances; disable MIG on it first");
  EXPECT_EQ(problems[1],
            "--gpu-sharing item '5=timeslice:2': GPU 5 is out of range (this node has 3 GPUs)");
  EXPECT_NE(problems[2].find("GPU 2 is in MIG mode; it cannot be handed out whole"),
            std::string::npos);
  EXPECT_EQ(gpus[0].mode, SharingMode::kShared);
  EXPECT_EQ(gpus[2].mode, SharingMode::kMig);
}

}  // namespace
}  // namespace tessera
