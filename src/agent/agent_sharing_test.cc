// The agent's --gpu-sharing (AgentOptions::gpu_sharing) over a fake inventory: the
// modes it reports, and a start-up refusal that names the item.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "agent/agent.h"

namespace tessera {
namespace {

class AgentSharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(mkdtemp(dir_), nullptr);
    options_.server_url = "http://127.0.0.1:1";  // never reached: Create only discovers
    options_.token = "join-token";
    options_.node_name = "n1";
    options_.data_dir = dir_;
    options_.use_cgroups = false;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  char dir_[40] = "/tmp/tessera_agent_sharing_XXXXXX";
  AgentOptions options_;
};

TEST_F(AgentSharingTest, TheFlagSetsTheReportedModes) {
  options_.fake_gpus = "3xA100-80GB,1xA100-80GB:mig";
  options_.gpu_sharing = "all=shared;2=timeslice:4";
  auto agent = Agent::Create(options_, GpuCatalog::Default());
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  const std::vector<GpuSpec>& gpus = (*agent)->inventory().spec.gpus;
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_EQ(gpus[0].mode, SharingMode::kShared);
  EXPECT_EQ(gpus[1].mode, SharingMode::kShared);
  EXPECT_EQ(gpus[2].mode, SharingMode::kTimeslice);
  EXPECT_EQ(gpus[2].replicas, 4);
  EXPECT_EQ(gpus[3].mode, SharingMode::kMig);  // "all" leaves MIG GPUs as they are
  EXPECT_TRUE(ValidateNodeSpec((*agent)->inventory().spec, GpuCatalog::Default()).ok());
}

TEST_F(AgentSharingTest, AMigGpuSetToSharedRefusesToStart) {
  options_.fake_gpus = "2xA100-80GB:mig,1xA100-80GB";
  options_.gpu_sharing = "2=shared;1=timeslice:2";
  auto agent = Agent::Create(options_, GpuCatalog::Default());
  ASSERT_FALSE(agent.ok());
  EXPECT_EQ(agent.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(agent.status().message(),
            "--gpu-sharing item '1=timeslice:2': GPU 1 is in MIG mode; MPS and time-slicing are "
            "not available on MIG instances; disable MIG on it first");
  options_.gpu_sharing = "0=turbo";
  agent = Agent::Create(options_, GpuCatalog::Default());
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.status().message().find("--gpu-sharing item '0=turbo': unknown sharing mode"),
            std::string::npos)
      << agent.status().message();
  options_.gpu_sharing = "7=shared";
  agent = Agent::Create(options_, GpuCatalog::Default());
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.status().message().find("GPU 7 is out of range (this node has 3 GPUs)"),
            std::string::npos)
      << agent.status().message();
}

}  // namespace
}  // namespace tessera
