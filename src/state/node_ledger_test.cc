#include "state/node_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/rng.h"

namespace tessera {
namespace {

// One node with two GPUs of each sharing mode (timeslice with 4 replicas).
NodeSpec MixedNode() {
  const GpuCatalog& c = GpuCatalog::Default();
  NodeSpec n;
  n.name = "mixed";
  n.cpu = MilliCpu(32000);
  n.memory = MiB(256 * 1024);
  n.numa_nodes = 2;
  GpuModelId h100 = *c.Find("H100-80GB");
  for (SharingMode mode : {SharingMode::kShared, SharingMode::kExclusive, SharingMode::kMig,
                           SharingMode::kTimeslice}) {
    for (int i = 0; i < 2; ++i) {
      n.gpus.push_back({h100, mode, i, 0, mode == SharingMode::kTimeslice ? 4 : 0});
    }
  }
  return n;
}

TEST(NodeLedgerTest, AllOrNothing) {
  NodeSpec spec = MixedNode();
  NodeLedger node(&spec, GpuCatalog::Default());
  Allocation a{NodeId(0),
               MilliCpu(1000),
               MiB(1024),
               {{0, MilliGpu(600), MiB(0)}, {1, MilliGpu(600), MiB(0)}}};
  ASSERT_TRUE(node.Allocate(a).ok());
  uint64_t v = node.version();
  // Second grant cannot fit on GPU 1 (400 free): nothing may change.
  Allocation b{NodeId(0),
               MilliCpu(1000),
               MiB(1024),
               {{0, MilliGpu(300), MiB(0)}, {1, MilliGpu(500), MiB(0)}}};
  EXPECT_EQ(node.Allocate(b).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(node.gpus()[0].used_milli().value(), 600);
  EXPECT_EQ(node.used_cpu().value(), 1000);
  EXPECT_EQ(node.version(), v);
  // CPU over capacity fails before touching GPUs.
  Allocation c{NodeId(0), MilliCpu(40000), MiB(0), {{2, kWholeGpu, MiB(0)}}};
  EXPECT_EQ(node.Allocate(c).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(node.gpus()[2].idle());
  // The same GPU twice in one allocation is malformed.
  Allocation d{
      NodeId(0), MilliCpu(0), MiB(0), {{0, MilliGpu(100), MiB(0)}, {0, MilliGpu(100), MiB(0)}}};
  EXPECT_EQ(node.Allocate(d).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(node.free_gpu_milli().value(), 8000 - 1200);
}

// Draws a random allocation: usually plausible, sometimes over capacity or malformed.
// CPU and memory in their smallest units, and one draw in four asks for what `node`
// has left, one unit less or one unit more, so that an off-by-one capacity check fails.
Allocation RandomAllocation(Rng& rng, const NodeSpec& spec, const NodeLedger& node) {
  const GpuModel& h100 = GpuCatalog::Default().Get(spec.gpus[0].model);
  Allocation a;
  a.node = NodeId(0);
  a.cpu = MilliCpu(rng.Uniform(9001));
  a.memory = MiB(rng.Uniform(65 * 1024 + 1));
  if (rng.Uniform(4) == 0) {
    // Each on its own: one over by a unit must be the only reason for a refusal.
    const int64_t cpu_delta = static_cast<int64_t>(rng.Uniform(3)) - 1;
    const int64_t memory_delta = static_cast<int64_t>(rng.Uniform(3)) - 1;
    a.cpu = MilliCpu(std::max<int64_t>(node.free_cpu().value() + cpu_delta, 0));
    a.memory = MiB(std::max<int64_t>(node.free_memory().value() + memory_delta, 0));
  }
  int grants = static_cast<int>(rng.Uniform(3));
  uint32_t used = 0;
  for (int i = 0; i < grants; ++i) {
    int gpu = static_cast<int>(rng.Uniform(8));
    if ((used & (1U << gpu)) != 0) {
      continue;
    }
    used |= 1U << gpu;
    GpuGrant g;
    g.gpu = gpu;
    switch (spec.gpus[gpu].mode) {
      case SharingMode::kShared:
        g.milli = MilliGpu(50 * (1 + rng.Uniform(20)));
        g.memory = MiB(rng.Uniform(5) * 10240);
        break;
      case SharingMode::kExclusive:
        g.milli = kWholeGpu;
        break;
      case SharingMode::kTimeslice:
        // Whole replicas (250 each), now and then a malformed 300 or a memory charge.
        g.milli = MilliGpu(rng.Uniform(8) == 0 ? 300 : 250 * (1 + rng.Uniform(4)));
        g.memory = MiB(rng.Uniform(8) == 0 ? 1024 : 0);
        break;
      case SharingMode::kMig: {
        g.mig_profile =
            static_cast<int>(rng.Uniform(static_cast<uint32_t>(h100.mig_profiles.size())));
        const MigProfile& p = h100.mig_profiles[g.mig_profile];
        g.mig_start = static_cast<int>(rng.Uniform(8));
        g.milli = p.ChargedMilli();
        g.memory = p.memory;
        break;
      }
    }
    a.gpus.push_back(g);
  }
  return a;
}

void CheckNeverOvercommitted(const NodeLedger& node, const std::vector<Allocation>& live) {
  const NodeSpec& spec = node.spec();
  ASSERT_LE(node.used_cpu(), spec.cpu);
  ASSERT_LE(node.used_memory(), spec.memory);
  std::vector<int64_t> milli(spec.gpus.size(), 0);
  std::vector<int64_t> mem(spec.gpus.size(), 0);
  int64_t cpu = 0;
  for (const Allocation& a : live) {
    cpu += a.cpu.value();
    for (const GpuGrant& g : a.gpus) {
      milli[g.gpu] += g.milli.value();
      mem[g.gpu] += g.memory.value();
    }
  }
  ASSERT_EQ(cpu, node.used_cpu().value());
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    const GpuLedger& g = node.gpus()[i];
    ASSERT_EQ(g.used_milli().value(), milli[i]);
    ASSERT_EQ(g.used_memory().value(), mem[i]);
    ASSERT_LE(milli[i], kMilliPerGpu);
    ASSERT_LE(mem[i], g.model().memory.value());
    if (g.mode() == SharingMode::kMig) {
      ASSERT_LE(g.mig().used_compute(), kMigComputeSlices);
    }
    if (g.mode() == SharingMode::kTimeslice) {
      ASSERT_EQ(g.used_replicas(), milli[i] / 250);
      ASSERT_LE(g.used_replicas(), g.replicas());
      ASSERT_EQ(mem[i], 0);
    }
  }
}

TEST(NodeLedgerTest, CapacityIsExactToTheUnit) {
  NodeSpec spec = MixedNode();
  NodeLedger node(&spec, GpuCatalog::Default());
  Allocation most{NodeId(0), MilliCpu(31999), MiB(256 * 1024 - 1), {{0, MilliGpu(999), MiB(0)}}};
  ASSERT_TRUE(node.Allocate(most).ok());
  // One unit over, of any one resource, is refused; what is left exactly fits.
  EXPECT_EQ(node.Allocate({NodeId(0), MilliCpu(2), MiB(0), {}}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(node.Allocate({NodeId(0), MilliCpu(0), MiB(2), {}}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(node.Allocate({NodeId(0), MilliCpu(0), MiB(0), {{0, MilliGpu(2), MiB(0)}}}).code(),
            StatusCode::kResourceExhausted);
  ASSERT_TRUE(node.Allocate({NodeId(0), MilliCpu(1), MiB(1), {{0, MilliGpu(1), MiB(0)}}}).ok());
  EXPECT_EQ(node.free_cpu().value(), 0);
  EXPECT_EQ(node.free_memory().value(), 0);
  EXPECT_EQ(node.gpus()[0].used_milli().value(), 1000);
  EXPECT_EQ(node.Allocate({NodeId(0), MilliCpu(1), MiB(0), {}}).code(),
            StatusCode::kResourceExhausted);
}

TEST(NodeLedgerPropertyTest, RandomSequencesNeverOvercommitAndRestoreExactly) {
  NodeSpec spec = MixedNode();
  const NodeLedger fresh(&spec, GpuCatalog::Default());
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Pcg32 rng(seed);
    NodeLedger node(&spec, GpuCatalog::Default());
    std::vector<Allocation> live;
    int accepted = 0;
    for (int step = 0; step < 400; ++step) {
      if (!live.empty() && rng.Uniform(3) == 0) {
        size_t k = rng.Uniform(static_cast<uint32_t>(live.size()));
        ASSERT_TRUE(node.Release(live[k]).ok());
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        Allocation a = RandomAllocation(rng, spec, node);
        NodeLedger before = node;
        if (node.Allocate(a).ok()) {
          live.push_back(a);
          ++accepted;
        } else {
          ASSERT_TRUE(node.SameUsage(before)) << "failed Allocate changed the ledger";
        }
      }
      CheckNeverOvercommitted(node, live);
    }
    EXPECT_GT(accepted, 20) << "seed " << seed << ": the generator should mostly fit";
    while (!live.empty()) {
      size_t k = rng.Uniform(static_cast<uint32_t>(live.size()));
      ASSERT_TRUE(node.Release(live[k]).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    EXPECT_TRUE(node.SameUsage(fresh)) << "seed " << seed;
    for (const GpuLedger& g : node.gpus()) {
      EXPECT_TRUE(g.mig().empty());
    }
  }
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Shares of one identity at a time on a shared GPU whose node's MPS serves one user;
// the labels decide, and a relabel applies at once.
TEST(NodeLedgerTest, SingleUserMpsAdmitsOneIdentityPerSharedGpu) {
  NodeSpec spec = MixedNode();
  spec.labels = {{"mps", "on"}};
  const GpuCatalog& c = GpuCatalog::Default();
  NodeLedger node(&spec, c);
  EXPECT_TRUE(node.gpus()[0].one_user());
  EXPECT_FALSE(node.gpus()[2].one_user());  // exclusive
  EXPECT_FALSE(node.gpus()[6].one_user());  // timeslice: no MPS
  Allocation a{NodeId(0), MilliCpu(1000), MiB(0), {{0, MilliGpu(250), MiB(1024)}}, 7};
  ASSERT_TRUE(node.Allocate(a).ok());
  const GpuLedger& g = node.gpus()[0];
  EXPECT_TRUE(g.AdmitsIdentity(7));
  EXPECT_FALSE(g.AdmitsIdentity(8));
  EXPECT_TRUE(g.AdmitsIdentity(0));  // unknown: not restricted
  EXPECT_TRUE(node.gpus()[1].AdmitsIdentity(8));
  // Allocate does not enforce the rule (work already running is re-adopted).
  Allocation b{NodeId(0), MilliCpu(1000), MiB(0), {{0, MilliGpu(250), MiB(1024)}}, 8};
  ASSERT_TRUE(node.Allocate(b).ok());
  EXPECT_EQ(g.identities(), (std::vector<std::pair<uint64_t, int32_t>>{{7, 1}, {8, 1}}));
  ASSERT_TRUE(node.Release(a).ok());
  EXPECT_FALSE(g.AdmitsIdentity(7));
  EXPECT_TRUE(g.AdmitsIdentity(8));

  // Multi-user MPS (and MPS off) admit everyone; the counts stay.
  NodeSpec multi = spec;
  multi.labels = {{"mps", "on"}, {"mps-multi-user", "on"}};
  const uint64_t version = node.version();
  node.RebindSpec(&multi);
  EXPECT_GT(node.version(), version);
  EXPECT_FALSE(g.one_user());
  EXPECT_TRUE(g.AdmitsIdentity(7));
  NodeSpec off = spec;
  off.labels = {{"mps", "unavailable"}};
  node.RebindSpec(&off);
  EXPECT_TRUE(g.AdmitsIdentity(7));
  node.RebindSpec(&spec);
  EXPECT_FALSE(g.AdmitsIdentity(7));
  ASSERT_TRUE(node.Release(b).ok());
  EXPECT_TRUE(g.identities().empty());
  EXPECT_TRUE(g.AdmitsIdentity(7));
  EXPECT_TRUE(node.SameUsage(NodeLedger(&spec, c)));
}

}  // namespace
}  // namespace tessera
