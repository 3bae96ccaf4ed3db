#include "sim/job_workload.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include "sim/cluster_preset.h"

namespace tessera {
namespace {

constexpr Micros kMinute = 60LL * 1'000'000;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kDay = 24 * kHour;
constexpr std::array<Micros, 13> kRoundLimits = {15 * kMinute, 30 * kMinute, kHour,   2 * kHour,
                                                 4 * kHour,    8 * kHour,    12 * kHour, kDay,
                                                 2 * kDay,     3 * kDay,     7 * kDay,  14 * kDay,
                                                 30 * kDay};

std::string QueueOf(const std::string& tenant) { return tenant.empty() ? "default" : tenant; }

}  // namespace

Micros UserRuntimeLimit(Micros duration, Rng& rng) {
  Micros want = kRoundLimits.back();
  if (rng.UniformDouble() >= 0.2) {
    const double factor = 1.2 + 3.8 * rng.UniformDouble();
    const auto scaled = static_cast<Micros>(static_cast<double>(duration) * factor);
    want = kRoundLimits.back();
    for (Micros r : kRoundLimits) {
      if (r >= scaled) {
        want = r;
        break;
      }
    }
  }
  return std::max(want, duration);
}

std::vector<SimJob> JobsFromTrace(const JobTrace& trace, const WorkloadOptions& options) {
  Pcg32 rng(options.seed, 0x11a1);
  std::vector<SimJob> jobs;
  jobs.reserve(trace.jobs.size());
  const int per_node = std::max(1, options.gpus_per_node);
  for (const TraceJob& t : trace.jobs) {
    SimJob j;
    j.duration = t.duration;
    JobSpec& s = j.spec;
    s.name = t.name;
    s.queue = QueueOf(t.tenant);
    s.user = t.tenant;
    s.submit_time = t.submit;
    s.checkpoint_interval = options.checkpoint_interval;
    s.checkpoint_on_signal = options.checkpoint_on_signal;
    s.runtime_limit = UserRuntimeLimit(t.duration, rng);
    const int tasks = options.gpus_anywhere ? t.gpus : (t.gpus + per_node - 1) / per_node;
    for (int i = 0; i < tasks; ++i) {
      // Spread G GPUs over the tasks as evenly as possible.
      const int g = t.gpus / tasks + (i < t.gpus % tasks ? 1 : 0);
      TaskRequest r;
      r.gpu_count = g;
      r.gpu_milli = kWholeGpu;
      r.cpu = MilliCpu(kPresetCpuMilliPerGpu * g);
      r.memory = MiB(kPresetMemoryMiBPerGpu * g);
      s.tasks.push_back(r);
    }
    if (tasks > 1 && !options.gpus_anywhere) {
      s.topology = TopologyPolicy{TopologyScope::kRack, false};
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

std::vector<std::string> TraceTenants(const JobTrace& trace) {
  std::vector<std::string> tenants;
  std::unordered_set<std::string> seen;
  for (const TraceJob& t : trace.jobs) {
    std::string q = QueueOf(t.tenant);
    if (seen.insert(q).second) {
      tenants.push_back(q);
    }
  }
  return tenants;
}

}  // namespace tessera
