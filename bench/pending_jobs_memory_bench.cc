// The controller's memory per pending job: a controller in process on a manual clock,
// 4 fake nodes of 8 GPUs held by running jobs, and N one-GPU jobs (default 100,000)
// left pending, submitted one by one, in batches of 1,000 or as arrays of 1,000 (each
// kind measured on its own controller). After one scheduling cycle (so each job has its
// wait context and reason) it prints the heap bytes (mallinfo2) and the resident set
// growth per pending job, and the seconds a cycle and a reopen of the controller take.
// The store keeps nothing, so what is measured is the controller's own memory.
//
// Usage: pending_jobs_memory_bench [--jobs N] [--kind single|batch|array|all]

#include <malloc.h>

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

constexpr int kNodes = 4;
constexpr int kGpus = 8;
constexpr int64_t kChunk = 1000;

size_t HeapBytes() {
  malloc_trim(0);
  return mallinfo2().uordblks;
}

// Submits `n` jobs like `job` the way `kind` says. False (after saying why) on a refusal.
bool SubmitPending(Controller& controller, const Principal& tenant, const JobSubmission& job,
                   const std::string& kind, int64_t n) {
  for (int64_t done = 0; done < n;) {
    const int64_t chunk = kind == "single" ? 1 : std::min(kChunk, n - done);
    StatusOr<JobIntake::Submitted> r = Status::Ok();
    if (kind == "single") {
      r = controller.intake().Submit(tenant, job, "");
    } else if (kind == "batch") {
      r = controller.intake().SubmitBatch(
          tenant, std::vector<JobSubmission>(static_cast<size_t>(chunk), job), "");
    } else {
      JobSubmission array = job;
      array.array = "0-" + std::to_string(chunk - 1);
      r = controller.intake().Submit(tenant, array, "");
    }
    if (!r.ok()) {
      std::fprintf(stderr, "%s submit refused: %s\n", kind.c_str(), r.status().ToString().c_str());
      return false;
    }
    done += chunk;
  }
  return true;
}

struct Figures {
  double heap_per_job = 0, rss_per_job = 0, cycle_s = 0;
};

// One controller: the nodes filled by running jobs, then `n` pending ones of `kind`.
bool Measure(const std::string& kind, int64_t n, Figures* out) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  std::string dir = (std::filesystem::temp_directory_path() / "tessera-mem-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return false;
  }
  ManualClock clock(1'800'000'000LL * 1'000'000);
  DiscardingStore store;
  ControllerOptions options;
  options.data_dir = dir;
  options.node_timeout = 1'000'000LL * 1'000'000;
  StatusOr<std::unique_ptr<Controller>> opened = Controller::Open(
      options, &store, catalog, clock,
      "queues: [{name: bench, quota: {gpu: 10000}, maxPending: 10000000}]\n");
  if (!opened.ok() || !bench::RegisterFakeNodes(**opened, kNodes, kGpus)) {
    std::fprintf(stderr, "%s\n", opened.ok() ? "registration refused"
                                             : opened.status().ToString().c_str());
    return false;
  }
  Controller& controller = **opened;
  StatusOr<JobSubmission> job = ParseJobYaml(
      "name: step\nresources: {gpus: 1, gpu_model: H100-80GB}\ncommand: [python3, train.py, "
      "--epochs, '3']\nenv: {WANDB_PROJECT: bench}\n",
      catalog);
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
    return false;
  }
  const Principal tenant{Role::kTenant, "bench", "bench"};
  // Fill every GPU first so that what follows stays pending.
  if (!SubmitPending(controller, tenant, *job, "single", kNodes * kGpus) ||
      !controller.RunCycle().ok()) {
    return false;
  }
  const size_t heap0 = HeapBytes();
  const double rss0 = RssMib();
  if (!SubmitPending(controller, tenant, *job, kind, n)) {
    return false;
  }
  clock.Advance(1'000'000);
  const auto start = std::chrono::steady_clock::now();
  if (!controller.RunCycle().ok()) {
    std::fprintf(stderr, "cycle failed\n");
    return false;
  }
  out->cycle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out->heap_per_job = static_cast<double>(HeapBytes() - heap0) / static_cast<double>(n);
  out->rss_per_job = (RssMib() - rss0) * 1024 * 1024 / static_cast<double>(n);
  opened->reset();
  std::filesystem::remove_all(dir);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t jobs = 100'000;
  std::string kinds = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--jobs") == 0) {
      jobs = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--kind") == 0) {
      kinds = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: pending_jobs_memory_bench [--jobs N] [--kind KIND|all]\n");
      return 2;
    }
  }
  std::printf("%lld pending one-GPU jobs a kind, in process, the store keeping nothing\n",
              static_cast<long long>(jobs));
  std::printf("%-8s %14s %14s %10s\n", "kind", "heap B/job", "RSS B/job", "cycle s");
  for (const char* kind : {"single", "batch", "array"}) {
    if (kinds != "all" && kinds != kind) {
      continue;
    }
    Figures f;
    if (!Measure(kind, jobs, &f)) {
      return 1;
    }
    std::printf("%-8s %14.0f %14.0f %10.3f\n", kind, f.heap_per_job, f.rss_per_job, f.cycle_s);
    std::fflush(stdout);
  }
  return 0;
}
