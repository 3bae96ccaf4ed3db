// Placement speed on the Alibaba GPU-sharing trace (openb, FGD paper).
//
//   BM_PlaceWorkload/<policy>/<nodes>: place the `default` pod list, sampled with a
//     fixed seed until the arrived GPU request reaches 100% of capacity, onto an empty
//     cluster of the openb GPU nodes (1,213) or of 10,000 synthetic nodes (the openb
//     node mix repeated); counter `decisions_per_s` is placement decisions (placed or
//     not) per second, each one Place plus Allocate.
//   BM_FgdRun/<policy>: one whole `tessera sim fgd` run on `default` (seed 42): the
//     paper's experiment, tuning, binning and fragmentation bookkeeping included.
//
// Build the release preset and run: build/release/bench/placement_bench
// The traces folder comes from TESSERA_TRACES_DIR, else the path CMake recorded.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "plugins/fgd.h"
#include "plugins/registry.h"
#include "sched/placer.h"
#include "sim/fgd_experiment.h"
#include "sim/openb_trace.h"

namespace tessera {
namespace {

const char* const kPolicies[] = {"bestfit", "fgd", "tessera"};

std::string TraceDir() {
  const char* env = std::getenv("TESSERA_TRACES_DIR");
  std::string root = env != nullptr && *env != '\0' ? env : TESSERA_DEFAULT_TRACES_DIR;
  return root + "/alibaba-gpu-v2023-fgd/";
}

struct Inputs {
  std::vector<NodeSpec> openb_nodes;
  PodList pods;
  std::unique_ptr<FragmentationModel> typical;
  std::unique_ptr<ClusterState> openb;
  std::unique_ptr<ClusterState> synthetic;  // 10,000 nodes
};

const Inputs& Load() {
  static const Inputs* inputs = [] {
    auto* in = new Inputs;
    const GpuCatalog& catalog = GpuCatalog::Default();
    StatusOr<std::vector<NodeSpec>> nodes =
        ReadOpenbNodes(TraceDir() + "openb_node_list_gpu_node.csv", catalog);
    StatusOr<PodList> pods = ReadOpenbPods(TraceDir() + "openb_pod_list_default.csv", catalog);
    if (!nodes.ok() || !pods.ok()) {
      std::cerr << "cannot read the openb trace under " << TraceDir() << ": "
                << (nodes.ok() ? pods.status() : nodes.status()).ToString() << "\n";
      std::exit(2);
    }
    in->openb_nodes = *nodes;
    in->pods = *std::move(pods);
    in->typical = std::make_unique<FragmentationModel>(FindTypicalTasks(in->pods.Requests()));
    in->openb = std::make_unique<ClusterState>(*ClusterState::Create(in->openb_nodes, catalog));
    std::vector<NodeSpec> many;
    for (int i = 0; i < 10000; ++i) {
      NodeSpec n = in->openb_nodes[i % in->openb_nodes.size()];
      n.name = "synthetic-" + std::to_string(i);
      many.push_back(std::move(n));
    }
    in->synthetic = std::make_unique<ClusterState>(*ClusterState::Create(many, catalog));
    return in;
  }();
  return *inputs;
}

// Pods sampled from the trace until their GPU request reaches the cluster's capacity.
std::vector<TaskRequest> Workload(const Inputs& in, const ClusterState& cluster) {
  Pcg32 rng(42);
  std::vector<TaskRequest> out;
  int64_t gpu = 0;
  const int64_t capacity = cluster.total_gpu_milli().value();
  const auto n = static_cast<uint32_t>(in.pods.pods.size());
  while (gpu < capacity) {
    const TaskRequest& r = in.pods.pods[rng.Uniform(n)].request;
    gpu += r.gpu_milli.value() * r.gpu_count;
    out.push_back(r);
  }
  return out;
}

void BM_PlaceWorkload(benchmark::State& state) {
  const Inputs& in = Load();
  const std::string policy = kPolicies[state.range(0)];
  const ClusterState& empty = state.range(1) == 0 ? *in.openb : *in.synthetic;
  const std::vector<TaskRequest> workload = Workload(in, empty);
  int64_t decisions = 0;
  int64_t placed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    ClusterState cluster = empty;
    StatusOr<Profile> profile = MakeProfile(policy, {ScaleOf(cluster), in.typical.get()});
    Placer placer(std::move(profile).value());
    Pcg32 rng(7);
    state.ResumeTiming();
    for (const TaskRequest& r : workload) {
      Placement p = placer.Place(cluster, r, rng);
      if (p.placed) {
        benchmark::DoNotOptimize(cluster.Allocate(p.allocation));
        ++placed;
      }
      ++decisions;
    }
  }
  state.SetLabel(policy + " on " + std::to_string(empty.node_count()) + " nodes");
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
  state.counters["placed_pct"] =
      100.0 * static_cast<double>(placed) / static_cast<double>(std::max<int64_t>(1, decisions));
}
BENCHMARK(BM_PlaceWorkload)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->ArgNames({"policy", "synthetic10k"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_FgdRun(benchmark::State& state) {
  const Inputs& in = Load();
  const std::string policy = kPolicies[state.range(0)];
  double unallocated = 0;
  for (auto _ : state) {
    FgdRunSpec spec{in.openb.get(), &in.pods, in.typical.get(), policy, 42, 1.3};
    StatusOr<FgdRunResult> r = RunFgdExperiment(spec);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    unallocated = r->UnallocatedAt100();
  }
  state.SetLabel(policy + " on default, seed 42");
  state.counters["unallocated_pct"] = unallocated;
}
BENCHMARK(BM_FgdRun)
    ->DenseRange(0, 2)
    ->ArgName("policy")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
