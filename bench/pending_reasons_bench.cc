// What pending reasons cost the controller per published wait context, and a read:
// the fingerprint of the nodes and drains (every cycle), the never-fits cache (built
// when the fingerprint changes), the live copy (every cycle while jobs wait), the first
// reason of a demand (never fits, resources) and a memoised one.
// Then, per hard topology scope, FitChecker::Check (submission, on the empty copy) and
// GangPlaces (the live copy) for a 2-task x 8-GPU gang on 8-GPU nodes, which never fits
// within one node; the NVLink domain is unlabelled (each node its own group) and racks
// hold 32 nodes.
// Usage: pending_reasons_bench [--nodes N[,N...]] [--scopes-only]
//   (default 1000,10000).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "model/gpu_catalog.h"
#include "server/job_views.h"
#include "plugins/fit_check.h"
#include "server/pending_reasons.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point from) {
  return std::chrono::duration<double, std::milli>(Clock::now() - from).count();
}

// Best of `runs`, in ms.
template <typename F>
double Best(int runs, F&& f) {
  double best = 1e18;
  for (int i = 0; i < runs; ++i) {
    const auto t = Clock::now();
    f();
    best = std::min(best, Ms(t));
  }
  return best;
}

int Run(size_t n) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  const GpuModelId h100 = catalog.Find("H100-80GB").value();
  std::vector<NodeSpec> specs;
  for (size_t i = 0; i < n; ++i) {
    NodeSpec s = MakeUniformNode("n" + std::to_string(i), MilliCpu(128000), MiB(1 << 20), h100, 8,
                                 SharingMode::kExclusive, 2, true);
    s.labels = {{"rack", "r" + std::to_string(i / 32)}};
    specs.push_back(std::move(s));
  }
  StatusOr<ClusterState> made = ClusterState::Create(std::move(specs), catalog);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 1;
  }
  ClusterState state = std::move(made).value();
  // Seven of every node's eight GPUs busy; one node drained.
  for (size_t i = 0; i < n; ++i) {
    Allocation a;
    a.node = NodeId(static_cast<uint32_t>(i));
    for (int g = 0; g < 7; ++g) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
    (void)state.Allocate(a);
  }
  (void)state.SetNodeDrained(NodeId(0), true);

  uint64_t sink = 0;
  const double fingerprint = Best(5, [&] { sink += FitCache::Fingerprint(state); });
  std::shared_ptr<const FitCache> fit;
  const double fit_build = Best(3, [&] { fit = std::make_shared<const FitCache>(state); });
  std::shared_ptr<const LiveCache> live;
  const double live_build = Best(3, [&] { live = std::make_shared<const LiveCache>(state); });

  auto c = std::make_shared<WaitContext>();
  c->built = true;
  c->nodes_up = n;
  c->fit = fit;
  c->live = live;
  JobSpec gang;
  gang.tasks.assign(2, TaskRequest{});
  for (TaskRequest& t : gang.tasks) {
    t.cpu = MilliCpu(1000);
    t.gpu_count = 8;
    t.gpu_milli = kWholeGpu;
  }
  JobSpec never = gang;
  never.tasks.assign(static_cast<size_t>(8 * n), gang.tasks[0]);  // 8 GPUs x 8n tasks
  std::string reason;
  const double first_resources = Best(1, [&] {
    reason = PendingReasonOf(DemandOf(JobNumber(1), "q", gang, catalog), *c, catalog);
  });
  const double memo = Best(5, [&] {
    reason = PendingReasonOf(DemandOf(JobNumber(1), "q", gang, catalog), *c, catalog);
  });
  std::string never_reason;
  const double first_never = Best(1, [&] {
    never_reason = PendingReasonOf(DemandOf(JobNumber(2), "q", never, catalog), *c, catalog);
  });
  std::printf("| %zu | %.2f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.3f ms |\n", n,
              fingerprint, fit_build, live_build, first_resources, first_never, memo);
  std::fprintf(stderr, "  %s\n  %s\n", reason.c_str(), never_reason.c_str());
  return sink == 42 ? 1 : 0;
}

// The gang by scope: rows "| nodes | scope | Check (empty copy) | GangPlaces (live) |".
int RunScopes(size_t n) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  const GpuModelId h100 = catalog.Find("H100-80GB").value();
  std::vector<NodeSpec> specs;
  for (size_t i = 0; i < n; ++i) {
    NodeSpec s = MakeUniformNode("n" + std::to_string(i), MilliCpu(128000), MiB(1 << 20), h100, 8,
                                 SharingMode::kExclusive, 2, true);
    s.labels = {{"rack", "r" + std::to_string(i / 32)}};
    specs.push_back(std::move(s));
  }
  StatusOr<ClusterState> made = ClusterState::Create(std::move(specs), catalog);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 1;
  }
  ClusterState state = std::move(made).value();
  for (size_t i = 0; i < n; ++i) {  // seven of every node's eight GPUs busy
    Allocation a;
    a.node = NodeId(static_cast<uint32_t>(i));
    for (int g = 0; g < 7; ++g) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
    (void)state.Allocate(a);
  }
  const FitChecker empty(state);
  const FitChecker live(state, FitChecker::Copy::kAsIs);
  const std::pair<TopologyScope, const char*> scopes[] = {
      {TopologyScope::kAny, "any"},
      {TopologyScope::kNode, "node"},
      {TopologyScope::kNvlinkDomain, "nvlink-domain (unlabelled)"},
      {TopologyScope::kRack, "rack (32 nodes)"}};
  for (const auto& [scope, name] : scopes) {
    JobSpec gang;
    gang.tasks.assign(2, TaskRequest{});
    for (TaskRequest& t : gang.tasks) {
      t.cpu = MilliCpu(1000);
      t.gpu_count = 8;
      t.gpu_milli = kWholeGpu;
    }
    gang.topology = {scope, /*hard=*/true};
    FitVerdict v;
    bool places = false;
    const int runs = n > 2000 && scope != TopologyScope::kAny ? 1 : 3;
    const double check = Best(runs, [&] { v = empty.Check(gang); });
    const double gang_places = Best(runs, [&] { places = live.GangPlaces(gang); });
    std::printf("| %zu | %s | %.2f ms (%s) | %.2f ms (%s) |\n", n, name, check,
                v.fits ? "fits" : "never", gang_places, places ? "places" : "does not");
    std::fflush(stdout);
    if (!v.fits) {
      std::fprintf(stderr, "  %s\n", v.reason.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  std::string nodes = "1000,10000";
  bool scopes_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      nodes = argv[++i];
    } else if (std::strcmp(argv[i], "--scopes-only") == 0) {
      scopes_only = true;
    }
  }
  if (!scopes_only) {
    std::printf(
      "| nodes | fingerprint | never-fits cache | live copy | first reason (resources) | first "
      "reason (never fits) | memoised reason |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for (std::string_view n : tessera::Split(nodes, ',')) {
      if (tessera::Run(static_cast<size_t>(std::stoul(std::string(n)))) != 0) {
        return 1;
      }
    }
    std::printf("\n");
  }
  std::printf(
      "| nodes | hard scope | Check, 2 x 8-GPU gang (empty copy) | GangPlaces (live copy) |\n"
      "| --- | --- | --- | --- |\n");
  for (std::string_view n : tessera::Split(nodes, ',')) {
    if (tessera::RunScopes(static_cast<size_t>(std::stoul(std::string(n)))) != 0) {
      return 1;
    }
  }
  return 0;
}
