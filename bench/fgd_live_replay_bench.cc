// The FGD `default` pod list through the live controller (server/scenarios/fgd_controller_replay.h)
// against the placement experiment (`tessera sim fgd`), per seed: unallocated GPU % at
// 100 % arrived, live and simulated, and their difference (goal: within 0.5 point).
// Usage: fgd_live_replay_bench [--placement P] [--seeds 42-51] [TRACES_DIR]
// TRACES_DIR: else TESSERA_TRACES_DIR, else the path CMake recorded (data/traces).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "plugins/fgd.h"
#include "server/scenarios/fgd_controller_replay.h"
#include "sim/fgd_experiment.h"
#include "sim/openb_trace.h"
#include "state/cluster_state.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "fgd_live_replay_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  std::string placement = "tessera";
  uint64_t first = 42, last = 51;
  const char* env = std::getenv("TESSERA_TRACES_DIR");
  std::string traces = env != nullptr && *env != '\0' ? env : TESSERA_DEFAULT_TRACES_DIR;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--placement" && i + 1 < argc) {
      placement = argv[++i];
    } else if (a == "--seeds" && i + 1 < argc) {
      const std::string s = argv[++i];
      const size_t dash = s.find('-');
      first = std::stoull(s.substr(0, dash));
      last = dash == std::string::npos ? first : std::stoull(s.substr(dash + 1));
    } else if (a.rfind("--", 0) == 0) {
      return Fail("unknown option " + a);
    } else {
      traces = a;
    }
  }
  const GpuCatalog& catalog = GpuCatalog::Default();
  const std::string dir = traces + "/alibaba-gpu-v2023-fgd";
  auto nodes = ReadOpenbNodes(dir + "/openb_node_list_gpu_node.csv", catalog);
  auto pods = ReadOpenbPods(dir + "/openb_pod_list_default.csv", catalog);
  if (!nodes.ok() || !pods.ok()) {
    return Fail(!nodes.ok() ? nodes.status().ToString() : pods.status().ToString());
  }
  auto cluster = ClusterState::Create(*nodes, catalog);
  if (!cluster.ok()) {
    return Fail(cluster.status().ToString());
  }
  FragmentationModel typical(FindTypicalTasks(pods->Requests()));
  std::printf("placement %s, pod list default, %zu nodes\n", placement.c_str(), nodes->size());
  std::printf("%6s %10s %10s %8s %8s\n", "seed", "live %", "sim %", "diff", "live s");
  std::vector<double> diffs, live_all, sim_all;
  for (uint64_t seed = first; seed <= last; ++seed) {
    FgdLiveReplaySpec spec;
    spec.nodes = &nodes.value();
    spec.pods = &pods.value();
    spec.placement = placement;
    spec.seed = seed;
    auto live = ReplayFgdThroughController(spec, catalog);
    if (!live.ok()) {
      return Fail(live.status().ToString());
    }
    FgdRunSpec sim_spec;
    sim_spec.cluster = &cluster.value();
    sim_spec.pods = &pods.value();
    sim_spec.typical = &typical;
    sim_spec.policy = placement;
    sim_spec.seed = seed;
    auto sim = RunFgdExperiment(sim_spec);
    if (!sim.ok()) {
      return Fail(sim.status().ToString());
    }
    const double d = live->unallocated_at_100 - sim->UnallocatedAt100();
    diffs.push_back(std::abs(d));
    live_all.push_back(live->unallocated_at_100);
    sim_all.push_back(sim->UnallocatedAt100());
    std::printf("%6llu %10.2f %10.2f %+8.2f %8.1f\n", static_cast<unsigned long long>(seed),
                live->unallocated_at_100, sim->UnallocatedAt100(), d, live->seconds);
    std::fflush(stdout);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  std::printf("median: live %.2f %%, sim %.2f %%; largest |diff| %.2f point (goal <= 0.5)\n",
              median(live_all), median(sim_all), *std::max_element(diffs.begin(), diffs.end()));
  return 0;
}
