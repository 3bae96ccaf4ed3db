// The bounds on what an agent may claim at registration (inventory_bounds.h).
#include "server/inventory_bounds.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace inventory_bounds_test {

// A plausible 8-GPU machine, within every bound.
NodeInventory Machine() {
  NodeInventory inv;
  inv.spec.name = "gpu-node-01.rack2";
  inv.spec.cpu = MilliCpu(128 * 1000);
  inv.spec.memory = MiB(1024 * 1024);
  inv.spec.gpus.resize(8);
  inv.spec.labels = {{"rack", "r2"}};
  for (int g = 0; g < 8; ++g) {
    inv.gpu_uuids.push_back("GPU-0000000" + std::to_string(g));
  }
  inv.mig_instances.resize(1);
  inv.mig_instances[0].push_back({"MIG-0001", "1g.10gb", 0});
  return inv;
}

// The status's code is InvalidArgument and its message names `field`.
void ExpectRefused(const NodeInventory& inv, const std::string& field) {
  Status s = CheckInventoryBounds(inv);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
  EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
}

TEST(InventoryBoundsTest, APlausibleMachinePasses) {
  EXPECT_TRUE(CheckInventoryBounds(Machine()).ok()) << CheckInventoryBounds(Machine()).message();
  NodeInventory longest = Machine();
  longest.spec.name = std::string(253, 'a');
  EXPECT_TRUE(CheckInventoryBounds(longest).ok());
}

TEST(InventoryBoundsTest, ANodeNameIsAPlainHostName) {
  NodeInventory inv = Machine();
  inv.spec.name = std::string(254, 'a');
  ExpectRefused(inv, "inventory.name");
  inv.spec.name = "-node";
  ExpectRefused(inv, "inventory.name");
  inv.spec.name = ".node";
  ExpectRefused(inv, "inventory.name");
  inv.spec.name = "node/../x";
  ExpectRefused(inv, "inventory.name");
  inv.spec.name = "";
  ExpectRefused(inv, "inventory.name");
}

TEST(InventoryBoundsTest, CpuMemoryAndGpuCountsAreBounded) {
  NodeInventory inv = Machine();
  inv.spec.cpu = MilliCpu(-1);
  ExpectRefused(inv, "inventory.cpu_milli");
  inv = Machine();
  inv.spec.memory = MiB(int64_t{64} * 1024 * 1024 + 1);
  ExpectRefused(inv, "inventory.memory_mib");
  inv = Machine();
  inv.spec.gpus.resize(65);
  ExpectRefused(inv, "inventory.gpus: at most 64 GPUs, got 65");
  inv.spec.gpus.resize(64);
  EXPECT_TRUE(CheckInventoryBounds(inv).ok());
}

TEST(InventoryBoundsTest, UuidsAndMigListsMayNotOutnumberTheGpus) {
  NodeInventory inv = Machine();
  inv.gpu_uuids.push_back("GPU-extra");
  ExpectRefused(inv, "more UUIDs than GPUs");
  inv = Machine();
  inv.gpu_uuids[3] = "GPU with spaces";
  ExpectRefused(inv, "inventory.gpus[3].uuid");
  inv = Machine();
  inv.mig_instances.resize(9);
  ExpectRefused(inv, "more MIG lists than GPUs");
}

TEST(InventoryBoundsTest, AMigInstanceOutOfBoundsIsRefused) {
  NodeInventory inv = Machine();
  inv.mig_instances[0][0].start = 65;
  ExpectRefused(inv, "inventory.gpus[0].mig_instances");
  inv = Machine();
  inv.mig_instances[0][0].profile = std::string(65, 'g');
  ExpectRefused(inv, "inventory.gpus[0].mig_instances");
  inv = Machine();
  inv.mig_instances[0].assign(8, NodeMigInstance{"MIG-x", "1g.10gb", 0});
  ExpectRefused(inv, "at most 7 MIG instances, got 8");
}

TEST(InventoryBoundsTest, LabelsFollowTheAgentsSyntax) {
  NodeInventory inv = Machine();
  inv.spec.labels = {{"", "x"}};
  EXPECT_EQ(CheckInventoryBounds(inv).code(), StatusCode::kInvalidArgument);
}

TEST(InventoryBoundsTest, ARegistrationPassesTheBoundsThenTheSpecsMeaning) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  NodeInventory inv = Machine();
  for (GpuSpec& gpu : inv.spec.gpus) {
    gpu.model = catalog.Find("H100-80GB").value();
  }
  EXPECT_TRUE(ValidateInventory(inv, catalog).ok()) << ValidateInventory(inv, catalog).message();
  // In bounds, but a GPU of no known model: the spec's check refuses it.
  NodeInventory unknown = inv;
  unknown.spec.gpus[2].model = GpuModelId();
  Status s = ValidateInventory(unknown, catalog);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("GPU 2 has an unknown model"), std::string::npos) << s.message();
  // Out of bounds and of no known model: the bounds answer first.
  unknown.spec.name = "";
  EXPECT_NE(ValidateInventory(unknown, catalog).message().find("inventory.name"),
            std::string::npos);
}

}  // namespace inventory_bounds_test
}  // namespace tessera
