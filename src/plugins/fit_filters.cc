#include "plugins/fit_filters.h"

#include <algorithm>
#include <map>

#include "sched/gpu_selection.h"

namespace tessera {
namespace {

// Whether a GPU could ever serve the request (on an empty node).
bool GpuCanServe(const GpuLedger& gpu, const TaskRequest& request) {
  if (!request.models.Allows(gpu.model().id)) {
    return false;
  }
  if (request.wants_mig()) {
    return gpu.mode() == SharingMode::kMig && gpu.model().FindMigProfile(request.mig_profile);
  }
  if (gpu.mode() == SharingMode::kMig) {
    return false;
  }
  if (request.gpu_memory.value() > 0 && request.gpu_memory > gpu.model().memory) {
    return false;
  }
  // Whole cards anywhere but timeslice; shares on shared and timeslice GPUs.
  return request.gpu_milli == kWholeGpu ? gpu.mode() != SharingMode::kTimeslice
                                        : TakesShares(gpu.mode());
}

}  // namespace

FilterResult ResourceFitFilter::Filter(const NodeLedger& node, const TaskRequest& r) const {
  if (r.needs_containers && node.spec().Label(kContainersLabel).empty()) {
    return FilterResult::Never("node runs no containers (no 'containers' label)");
  }
  if (r.cpu > node.spec().cpu) {
    return FilterResult::Never("node has fewer CPUs than requested", FilterCause::kCpu);
  }
  if (r.memory > node.spec().memory) {
    return FilterResult::Never("node has less memory than requested", FilterCause::kMemory);
  }
  if (r.cpu > node.free_cpu()) {
    return FilterResult::NotNow("not enough free CPU", FilterCause::kCpu);
  }
  if (r.memory > node.free_memory()) {
    return FilterResult::NotNow("not enough free memory", FilterCause::kMemory);
  }
  return FilterResult::Fits();
}

FilterResult GpuFitFilter::Filter(const NodeLedger& node, const TaskRequest& r) const {
  if (r.cpu_only()) {
    return FilterResult::Fits();
  }
  if (node.gpu_count() < r.gpu_count) {
    return FilterResult::Never("node has fewer GPUs than requested", FilterCause::kGpuCount);
  }
  int capable = 0;
  int fitting = 0;
  int other_user = 0;  // room, but their single-user MPS serves another identity now
  for (const GpuLedger& gpu : node.gpus()) {
    if (!GpuCanServe(gpu, r)) {
      continue;
    }
    ++capable;
    fitting += GpuFitsRequest(gpu, r) ? 1 : 0;
    other_user += GpuHeldByAnotherUser(gpu, r) ? 1 : 0;
  }
  if (capable < r.gpu_count) {
    if (r.wants_mig()) {
      return FilterResult::Never("no MIG GPU of an allowed model with this profile", FilterCause::kMig);
    }
    return FilterResult::Never("too few GPUs of an allowed model and sharing mode",
                               FilterCause::kGpuKind);
  }
  if (fitting < r.gpu_count && fitting + other_user >= r.gpu_count) {
    return FilterResult::NotNow(
        "the shared GPUs with room hold another tenant's shares, and this node's MPS serves "
        "one Unix user per GPU at a time",
        FilterCause::kMpsUser);
  }
  if (fitting < r.gpu_count) {
    return r.wants_mig()
               ? FilterResult::NotNow("no free MIG slot for the profile", FilterCause::kMig)
               : FilterResult::NotNow("not enough free GPU", FilterCause::kGpuCount);
  }
  return FilterResult::Fits();
}

FilterResult GpuLocalityFilter::Filter(const NodeLedger& node, const TaskRequest& r) const {
  if (r.topology != GpuTopology::kRequireLocal || r.gpu_count <= 1 || r.wants_mig()) {
    return FilterResult::Fits();
  }
  // Could the node ever hold the task locally? Count GPUs per NVLink domain and per
  // NUMA node on the spec.
  std::map<int, int> per_domain;
  std::map<int, int> per_numa;
  const auto& specs = node.spec().gpus;
  for (size_t i = 0; i < specs.size(); ++i) {
    const GpuSpec& g = specs[i];
    if (!GpuCanServe(node.gpus()[i], r)) {
      continue;
    }
    if (g.nvlink_domain >= 0) {
      ++per_domain[g.nvlink_domain];
    }
    ++per_numa[g.numa_node];
  }
  bool ever = false;
  for (const auto& [d, n] : per_domain) {
    ever |= n >= r.gpu_count;
  }
  for (const auto& [d, n] : per_numa) {
    ever |= n >= r.gpu_count;
  }
  if (!ever) {
    return FilterResult::Never("no NVLink domain or NUMA node has enough GPUs",
                               FilterCause::kLocality);
  }
  if (BestWholeGpuLocality(node, r) > 2) {
    return FilterResult::NotNow("not enough free GPUs in one NVLink domain or NUMA node",
                                FilterCause::kLocality);
  }
  return FilterResult::Fits();
}

NodeScore GpuLocalityScorer::Score(const NodeLedger& node, const TaskRequest& r) {
  if (r.topology == GpuTopology::kAny || r.gpu_count <= 1 || r.wants_mig()) {
    return {3, {}};
  }
  return {3 - std::min(3, BestWholeGpuLocality(node, r)), {}};
}

}  // namespace tessera
