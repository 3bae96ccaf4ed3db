// Shared by the benchmarks that drive a controller in process (submit_bench,
// read_during_cycles_bench, finished_jobs_memory_bench, pending_jobs_memory_bench):
// fake nodes registered straight with the controller, and a store that keeps nothing.
// Thread safety: call before the benchmark's clients start.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/controller.h"

namespace tessera::bench {

// Accepts every batch and keeps nothing: what a benchmark measures is the controller's
// own memory (a real deployment's rows are on disk).
class DiscardingStore final : public Store {
 public:
  Status Commit(WriteBatch /*batch*/) override { return Status::Ok(); }
  StatusOr<std::vector<JobRow>> LoadJobs() override { return std::vector<JobRow>{}; }
  StatusOr<std::optional<JobRow>> LoadJob(uint64_t /*id*/) override {
    return std::optional<JobRow>();
  }
  StatusOr<std::vector<UsageRow>> LoadUsage(int64_t, int64_t) override {
    return std::vector<UsageRow>{};
  }
  StatusOr<std::vector<TokenRow>> LoadTokens() override { return std::vector<TokenRow>{}; }
  StatusOr<std::optional<std::string>> GetKv(std::string_view) override {
    return std::optional<std::string>();
  }
  StatusOr<std::vector<std::pair<std::string, std::string>>> ListKv(std::string_view) override {
    return std::vector<std::pair<std::string, std::string>>{};
  }
  Status Close() override { return Status::Ok(); }
};

// Registers nodes node-0..node-(n-1), each 64 CPUs, 512 GiB and `gpus` exclusive
// H100-80GB cards with made-up UUIDs. False when a registration is refused.
inline bool RegisterFakeNodes(Controller& controller, int nodes, int gpus) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  const GpuModelId h100 = catalog.Find("H100-80GB").value();
  for (int n = 0; n < nodes; ++n) {
    RegisterRequest reg;
    reg.agent_id = "bench";
    reg.inventory.spec = MakeUniformNode("node-" + std::to_string(n), MilliCpu(64000),
                                         MiB(512 * 1024), h100, gpus, SharingMode::kExclusive);
    for (int g = 0; g < gpus; ++g) {
      reg.inventory.gpu_uuids.push_back("GPU-" + std::to_string(n) + "-" + std::to_string(g));
      reg.inventory.mig_instances.emplace_back();
    }
    if (!controller.Register(reg, "127.0.0.1").ok()) {
      return false;
    }
  }
  return true;
}

}  // namespace tessera::bench
