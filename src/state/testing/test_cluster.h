// Test-only helpers shared by the tests of src/state, src/sched and src/plugins: the
// default GPU catalog (model/testing/test_catalog.h), a node with its ledger
// (TestNode), and builders of nodes, clusters and task requests. Header-only and part
// of no target: include it from *_test.cc files only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/quantity.h"
#include "base/rng.h"
#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "model/request.h"
#include "model/testing/test_catalog.h"
#include "state/cluster_state.h"
#include "state/gpu_ledger.h"
#include "state/node_ledger.h"

namespace tessera::testing {

// A NodeSpec and its ledger; the ledger points into the spec, so it never moves. Each
// helper below applies one allocation on NodeId(0) (Occupy: one per GPU) and fails the
// calling test when it does not fit.
struct TestNode {
  explicit TestNode(NodeSpec s) : spec(std::move(s)), ledger(&spec, Catalog()) {}
  TestNode(const TestNode&) = delete;
  TestNode& operator=(const TestNode&) = delete;

  // `cpu` milli-CPU, `memory` MiB and the GPU grants `gpus`.
  void Take(int64_t cpu, int64_t memory = 0, std::vector<GpuGrant> gpus = {}) {
    ASSERT_TRUE(ledger.Allocate({NodeId(0), MilliCpu(cpu), MiB(memory), std::move(gpus)}).ok());
  }
  // A share of `milli` on GPU `gpu`, charging `memory` MiB of its memory.
  void Share(int gpu, int64_t milli, int64_t memory = 0) {
    Take(0, 0, {{gpu, MilliGpu(milli), MiB(memory)}});
  }
  // The whole cards `gpus` as one allocation (one task of that many GPUs).
  void Whole(const std::vector<int>& gpus) {
    std::vector<GpuGrant> grants;
    for (int g : gpus) {
      grants.push_back({g, kWholeGpu, MiB(0)});
    }
    Take(0, 0, std::move(grants));
  }
  // The whole cards `gpus`, one allocation each (one-GPU tasks).
  void Occupy(std::initializer_list<int> gpus) {
    for (int g : gpus) {
      Whole({g});
    }
  }
  // A MIG instance of `profile` starting at memory slot `start` of GPU `gpu`.
  void Mig(int gpu, std::string_view profile, int start) {
    const GpuModel& m = ledger.gpus()[gpu].model();
    int p = *m.FindMigProfile(profile);
    Take(0, 0, {{gpu, m.mig_profiles[p].ChargedMilli(), m.mig_profiles[p].memory, p, start}});
  }

  NodeSpec spec;
  NodeLedger ledger;
};

// Random usage for property tests: a random multiple of 1000 milli-CPU (0 to 32 cores),
// with `with_memory` also a random multiple of 1024 MiB (0 to 64 GiB), then on each GPU
// up to three shares of 50 to 1000 milli, each where it still fits.
inline void TakeRandomShares(Rng& rng, TestNode& n, bool with_memory) {
  if (with_memory) {
    n.Take(static_cast<int64_t>(rng.Uniform(33)) * 1000,
           static_cast<int64_t>(rng.Uniform(65)) * 1024);
  } else {
    n.Take(static_cast<int64_t>(rng.Uniform(33)) * 1000);
  }
  for (int g = 0; g < n.ledger.gpu_count(); ++g) {
    for (int k = static_cast<int>(rng.Uniform(4)); k > 0; --k) {
      int64_t milli = 50 * (1 + static_cast<int64_t>(rng.Uniform(20)));
      if (n.ledger.gpus()[g].FitsShare(MilliGpu(milli), MiB(0))) {
        n.Share(g, milli);
      }
    }
  }
}

// `gpus` shared T4s with `cpu` milli-CPU and `memory` MiB.
inline NodeSpec T4Node(int gpus = 4, int64_t cpu = 32000, int64_t memory = 1 << 18,
                       std::string name = "n") {
  return MakeUniformNode(std::move(name), MilliCpu(cpu), MiB(memory), Model("T4"), gpus,
                         SharingMode::kShared);
}

// A ClusterState of `nodes` over the default catalog; fails the calling test if invalid.
inline ClusterState Cluster(std::vector<NodeSpec> nodes) {
  StatusOr<ClusterState> s = ClusterState::Create(std::move(nodes), Catalog());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

// Requests. GPU requests take 1000 milli-CPU unless told otherwise.

inline TaskRequest Request(int64_t cpu, int gpu_count = 0, int64_t milli = 0, int64_t memory = 0) {
  TaskRequest r;
  r.cpu = MilliCpu(cpu);
  r.memory = MiB(memory);
  r.gpu_count = gpu_count;
  r.gpu_milli = MilliGpu(milli);
  return r;
}

// CPU only: `cpu` milli-CPU and `memory` MiB.
inline TaskRequest Cpu(int64_t cpu, int64_t memory = 0) {
  TaskRequest r;
  r.cpu = MilliCpu(cpu);
  r.memory = MiB(memory);
  return r;
}

// `milli` of one GPU with `gpu_memory` MiB of its memory (0: no memory requirement).
inline TaskRequest Share(int64_t milli, int64_t cpu = 1000, int64_t gpu_memory = 0) {
  TaskRequest r = Cpu(cpu);
  r.gpu_count = 1;
  r.gpu_milli = MilliGpu(milli);
  r.gpu_memory = MiB(gpu_memory);
  return r;
}

// `count` whole GPUs.
inline TaskRequest Whole(int count, int64_t cpu = 1000,
                         GpuTopology topology = GpuTopology::kPreferLocal) {
  TaskRequest r = Cpu(cpu);
  r.gpu_count = count;
  r.gpu_milli = kWholeGpu;
  r.topology = topology;
  return r;
}

// One MIG instance of `profile`.
inline TaskRequest Mig(std::string profile) {
  TaskRequest r = Cpu(1000);
  r.gpu_count = 1;
  r.mig_profile = std::move(profile);
  return r;
}

}  // namespace tessera::testing
