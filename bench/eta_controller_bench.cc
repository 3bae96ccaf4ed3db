// The ETA refresh as the live controller runs it (EtaModule::RefreshEtas): 256 nodes of
// 8 H100s registered, 1,100 jobs submitted and a cycle run (about 1,000 start), then
// 10,000 more pending and a cycle; then refreshes, timing the part under the core lock
// (the copy of the core and the predictor's estimates) and the forecast without it.
// In process, manual clock, in-memory store.
//
//   build/release/bench/eta_controller_bench [--pending 10000] [--nodes 256] [--runs 5]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdlib.h>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "base/rng.h"
#include "server/controller.h"
#include "store/store.h"

namespace tessera {
namespace {

constexpr Micros kSec = 1'000'000;

int Run(int pending, int nodes, int runs) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  ManualClock clock(1'800'000'000LL * kSec);
  InMemoryStore store;
  std::string dir = (std::filesystem::temp_directory_path() / "tessera-eta-bench-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "cannot make a scratch directory\n");
    return 1;
  }
  ControllerOptions o;
  o.data_dir = dir;
  o.node_timeout = 1'000'000LL * kSec;
  o.eta.interval = 0;
  std::string queues = "queues:\n";
  for (int q = 0; q < 4; ++q) {
    queues += "  - name: q" + std::to_string(q) + "\n";
  }
  auto opened = Controller::Open(o, &store, catalog, clock, queues);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Controller> c = std::move(opened).value();
  for (int n = 0; n < nodes; ++n) {
    RegisterRequest r;
    r.agent_id = "agent-" + std::to_string(n);
    r.inventory.spec = MakeUniformNode("n" + std::to_string(n), MilliCpu(128'000), MiB(1 << 20),
                                       *catalog.Find("H100-80GB"), 8, SharingMode::kExclusive);
    for (int g = 0; g < 8; ++g) {
      r.inventory.gpu_uuids.push_back("GPU-" + std::to_string(n) + "-" + std::to_string(g));
    }
    r.inventory.mig_instances.resize(8);
    if (!c->Register(r, "127.0.0.1").ok()) {
      std::fprintf(stderr, "register failed\n");
      return 1;
    }
  }
  Pcg32 rng(7);
  const int sizes[] = {1, 1, 1, 1, 1, 1, 2, 2, 4, 8};
  auto submit = [&](int i) {
    JobSubmission s;
    s.spec.name = "j" + std::to_string(i);
    s.spec.queue = "q" + std::to_string(rng.Uniform(4));
    s.spec.user = s.spec.queue + "-user";
    const double hours = 1.0 / 60 * std::pow(24.0 * 60, rng.UniformDouble());  // 1 min to 1 day
    s.spec.runtime_limit = static_cast<Micros>(hours * 2 * 3600) * kSec;  // users overstate
    TaskRequest t;
    t.cpu = MilliCpu(1000);
    t.gpu_count = sizes[rng.Uniform(10)];
    t.gpu_milli = MilliGpu(kMilliPerGpu);
    s.spec.tasks.push_back(t);
    s.command = {"true"};
    return c->intake().Submit(Principal{Role::kAdmin, "", "bench"}, std::move(s), "").ok();
  };
  for (int i = 0; i < 1'100; ++i) {
    if (!submit(i)) {
      std::fprintf(stderr, "submit failed\n");
      return 1;
    }
  }
  (void)c->RunCycle();
  clock.Advance(3600 * kSec);
  for (int i = 0; i < pending; ++i) {
    if (!submit(1'100 + i)) {
      std::fprintf(stderr, "submit failed\n");
      return 1;
    }
  }
  (void)c->RunCycle();
  std::vector<double> locked, forecast;
  int64_t count = 0, with_eta = 0;
  for (int run = 0; run < runs; ++run) {
    auto t = c->etas().RefreshEtas();
    if (!t.ok() || *t == nullptr) {
      std::fprintf(stderr, "refresh failed\n");
      return 1;
    }
    locked.push_back(1e3 * (*t)->snapshot_seconds);
    forecast.push_back(1e3 * (*t)->forecast_seconds);
    count = (*t)->pending;
    with_eta = 0;
    for (const auto& [id, e] : (*t)->jobs) {
      with_eta += e.eta.has_value();
    }
    std::printf("  run %d: under the core lock %.1f ms, forecast %.1f ms\n", run + 1,
                locked.back(), forecast.back());
  }
  std::printf(
      "controller refresh, %d nodes x 8 GPUs: %lld pending (%lld with an ETA); under the core "
      "lock median %.1f ms, forecast median %.1f ms (max %.1f ms)\n",
      nodes, static_cast<long long>(count), static_cast<long long>(with_eta),
      bench::Percentile(locked, 0.5), bench::Percentile(forecast, 0.5),
      bench::Percentile(forecast, 1.0));
  c.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  int pending = 10'000, nodes = 256, runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--pending") == 0) {
      pending = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--nodes") == 0) {
      nodes = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--runs") == 0) {
      runs = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: eta_controller_bench [--pending N] [--nodes N] [--runs N]\n");
      return 2;
    }
  }
  return tessera::Run(pending, nodes, runs);
}
