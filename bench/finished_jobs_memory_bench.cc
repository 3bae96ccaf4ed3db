// The controller's memory as finished jobs pile up: a controller in process on a manual
// clock, 250 fake nodes of 8 GPUs, and N one-GPU jobs (default 1,000,000) run to the end
// in rounds of 2,000 (submit, one cycle, launch, exit). The store discards what it is
// given, so what grows is the controller's own memory alone (the store's rows are on
// disk in a real deployment). Prints the resident set size every N / 10 jobs, then the
// bytes per finished job over the run; with --keep K the controller keeps K finished
// jobs in memory (default its own default, 10,000; --keep 0 keeps none).
//
// Usage: finished_jobs_memory_bench [--jobs N] [--keep K]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/job_codec.h"
#include "base/clock.h"
#include "bench_cluster.h"
#include "bench_util.h"
#include "server/controller.h"

namespace {

using namespace tessera;  // NOLINT: a benchmark's main file

using tessera::bench::DiscardingStore;
using tessera::bench::RssMib;

constexpr int kNodes = 250;
constexpr int kGpus = 8;
constexpr int64_t kRound = kNodes * kGpus;

// False (after printing the usage) for a flag it does not know.
bool ParseFlags(int argc, char** argv, int64_t* jobs, int64_t* keep) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--jobs") == 0) {
      *jobs = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--keep") == 0) {
      *keep = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: finished_jobs_memory_bench [--jobs N] [--keep K]\n");
      return false;
    }
  }
  return true;
}

// One round: submits `n` jobs, runs a cycle, launches them on the nodes' heartbeats and
// reports them exited with the next ones. False (after saying why) when any step fails.
bool RunRound(Controller& controller, ManualClock& clock, const Principal& tenant,
              const JobSubmission& job, int64_t n, std::vector<std::vector<TaskReport>>& running) {
  for (int64_t i = 0; i < n; ++i) {
    if (!controller.intake().Submit(tenant, job, "").ok()) {
      std::fprintf(stderr, "submit failed\n");
      return false;
    }
  }
  clock.Advance(1'000'000);
  if (!controller.RunCycle().ok()) {
    std::fprintf(stderr, "cycle failed\n");
    return false;
  }
  int64_t started = 0;
  for (int node = 0; node < kNodes; ++node) {
    auto r =
        controller.Heartbeat(HeartbeatRequest{"node-" + std::to_string(node), "bench", {}, {}});
    if (!r.ok()) {
      std::fprintf(stderr, "heartbeat failed\n");
      return false;
    }
    for (const TaskLaunch& l : r->launch) {
      TaskReport exit;
      exit.key = l.key;
      exit.state = TaskState::kExited;
      running[static_cast<size_t>(node)].push_back(exit);
      ++started;
    }
  }
  clock.Advance(60'000'000);
  for (int node = 0; node < kNodes; ++node) {
    std::vector<TaskReport>& exits = running[static_cast<size_t>(node)];
    if (!controller.Heartbeat(HeartbeatRequest{"node-" + std::to_string(node), "bench", exits, {}})
             .ok()) {
      std::fprintf(stderr, "heartbeat failed\n");
      return false;
    }
    exits.clear();
  }
  if (started != n) {
    std::fprintf(stderr, "round started %lld of %lld jobs\n", static_cast<long long>(started),
                 static_cast<long long>(n));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t jobs = 1'000'000;
  int64_t keep = -1;
  if (!ParseFlags(argc, argv, &jobs, &keep)) {
    return 2;
  }
  const GpuCatalog& catalog = GpuCatalog::Default();
  std::string dir = (std::filesystem::temp_directory_path() / "tessera-mem-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  ManualClock clock(1'800'000'000LL * 1'000'000);
  DiscardingStore store;
  ControllerOptions options;
  options.data_dir = dir;
  options.node_timeout = 1'000'000LL * 1'000'000;
  if (keep >= 0) {
    options.finished_in_memory = static_cast<size_t>(keep);
  }
  const size_t kept = options.finished_in_memory;
  StatusOr<std::unique_ptr<Controller>> opened =
      Controller::Open(options, &store, catalog, clock,
                       "queues: [{name: bench, quota: {gpu: " + std::to_string(kRound) + "}}]\n");
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  Controller& controller = **opened;
  if (!bench::RegisterFakeNodes(controller, kNodes, kGpus)) {
    std::fprintf(stderr, "registration refused\n");
    return 1;
  }
  StatusOr<JobSubmission> job = ParseJobYaml(
      "name: step\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [train.py, --epochs, "
      "'3']\nenv: {WANDB_PROJECT: bench}\n",
      catalog);
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
    return 1;
  }
  const Principal tenant{Role::kTenant, "bench", "bench"};
  std::printf("finished jobs in memory at most %zu; %lld jobs in rounds of %lld\n", kept,
              static_cast<long long>(jobs), static_cast<long long>(kRound));
  std::printf("%12s %10s %10s\n", "finished", "RSS MiB", "seconds");
  const auto start = std::chrono::steady_clock::now();
  const double rss0 = RssMib();
  std::printf("%12d %10.1f %10.1f\n", 0, rss0, 0.0);
  int64_t finished = 0;
  int64_t next_report = jobs / 10;
  std::vector<std::vector<TaskReport>> running(kNodes);
  while (finished < jobs) {
    const int64_t n = std::min(kRound, jobs - finished);
    if (!RunRound(controller, clock, tenant, *job, n, running)) {
      return 1;
    }
    finished += n;
    if (finished >= next_report || finished == jobs) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%12lld %10.1f %10.1f\n", static_cast<long long>(finished), RssMib(), seconds);
      std::fflush(stdout);
      next_report += jobs / 10;
    }
  }
  const double growth = RssMib() - rss0;
  std::printf("growth %.1f MiB over %lld finished jobs: %.0f bytes per job\n", growth,
              static_cast<long long>(jobs), growth * 1024 * 1024 / static_cast<double>(jobs));
  opened->reset();
  std::filesystem::remove_all(dir);
  return 0;
}
