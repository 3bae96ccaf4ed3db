#include "sched/gpu_selection.h"

#include <bit>

namespace tessera {
namespace {

std::optional<int> MigProfileOf(const GpuLedger& gpu, const TaskRequest& request) {
  return gpu.model().FindMigProfile(request.mig_profile);
}

// Group key of a GPU at a locality level; -1 when the GPU cannot be grouped there.
int64_t GroupKey(const GpuSpec& g, int level) {
  switch (level) {
    case 0:
      return g.nvlink_domain < 0 ? -1 : (int64_t{g.nvlink_domain} << 16) | g.numa_node;
    case 1:
      return g.nvlink_domain < 0 ? -1 : g.nvlink_domain;
    case 2:
      return g.numa_node;
    default:
      return 0;
  }
}

uint64_t FreeWholeMask(const NodeLedger& node, const TaskRequest& request) {
  uint64_t free = 0;
  const auto& gpus = node.gpus();
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (GpuFitsRequest(gpus[i], request)) {
      free |= uint64_t{1} << i;
    }
  }
  return free;
}

uint64_t LowestBits(uint64_t mask, int count) {
  uint64_t out = 0;
  for (int i = 0; i < count && mask != 0; ++i) {
    uint64_t bit = mask & (~mask + 1);
    out |= bit;
    mask &= mask - 1;
  }
  return out;
}

// The best group at `level`: returns its free mask, or 0 when no group holds `count`.
uint64_t BestGroupAtLevel(const NodeLedger& node, uint64_t free, int count, int level) {
  const auto& specs = node.spec().gpus;
  uint64_t best = 0;
  int best_size = 0;
  uint64_t seen = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t bit = uint64_t{1} << i;
    if ((free & bit) == 0 || (seen & bit) != 0) {
      continue;
    }
    int64_t key = GroupKey(specs[i], level);
    if (key < 0) {
      continue;
    }
    uint64_t group = 0;
    for (size_t j = i; j < specs.size(); ++j) {
      uint64_t b = uint64_t{1} << j;
      if ((free & b) != 0 && GroupKey(specs[j], level) == key) {
        group |= b;
      }
    }
    seen |= group;
    int size = std::popcount(group);
    if (size >= count && (best == 0 || size < best_size)) {
      best = group;
      best_size = size;
    }
  }
  return best;
}

}  // namespace

bool GpuFitsRequest(const GpuLedger& gpu, const TaskRequest& request) {
  return GpuHasRoomFor(gpu, request) &&
         (!request.fractional() || gpu.AdmitsIdentity(request.identity));
}

bool GpuHeldByAnotherUser(const GpuLedger& gpu, const TaskRequest& request) {
  return request.fractional() && !gpu.AdmitsIdentity(request.identity) &&
         GpuHasRoomFor(gpu, request);
}

bool GpuHasRoomFor(const GpuLedger& gpu, const TaskRequest& request) {
  if (gpu.drained() || !request.models.Allows(gpu.model().id)) {
    return false;
  }
  if (request.wants_mig()) {
    if (gpu.mode() != SharingMode::kMig) {
      return false;
    }
    std::optional<int> p = MigProfileOf(gpu, request);
    return p && !gpu.mig().LegalStarts(*p).empty();
  }
  if (request.gpu_milli == kWholeGpu) {
    return gpu.FitsWhole() &&
           (request.gpu_memory.value() == 0 || request.gpu_memory <= gpu.model().memory);
  }
  return gpu.FitsShare(request.gpu_milli, request.gpu_memory);
}

std::optional<uint64_t> PickWholeGpus(const NodeLedger& node, const TaskRequest& request) {
  uint64_t free = FreeWholeMask(node, request);
  int count = request.gpu_count;
  if (std::popcount(free) < count) {
    return std::nullopt;
  }
  if (request.topology != GpuTopology::kAny) {
    for (int level = 0; level < 3; ++level) {
      uint64_t group = BestGroupAtLevel(node, free, count, level);
      if (group != 0) {
        return LowestBits(group, count);
      }
    }
  }
  return LowestBits(free, count);
}

int GpuSetLocality(const NodeLedger& node, uint64_t mask) {
  const auto& specs = node.spec().gpus;
  for (int level = 0; level < 3; ++level) {
    int64_t key = -2;
    bool same = true;
    for (size_t i = 0; i < specs.size() && same; ++i) {
      if ((mask & (uint64_t{1} << i)) == 0) {
        continue;
      }
      int64_t k = GroupKey(specs[i], level);
      if (k < 0 || (key != -2 && k != key)) {
        same = false;
      }
      key = k;
    }
    if (same) {
      return level;
    }
  }
  return 3;
}

int BestWholeGpuLocality(const NodeLedger& node, const TaskRequest& request) {
  uint64_t free = FreeWholeMask(node, request);
  if (std::popcount(free) < request.gpu_count) {
    return 4;
  }
  for (int level = 0; level < 3; ++level) {
    if (BestGroupAtLevel(node, free, request.gpu_count, level) != 0) {
      return level;
    }
  }
  return 3;
}

std::optional<GpuChoice> SelectGpus(const NodeLedger& node, const TaskRequest& request,
                                    GpuSelection selection, Rng& rng) {
  if (request.cpu_only()) {
    return GpuChoice{};
  }
  const auto& gpus = node.gpus();
  if (request.wants_mig()) {
    int best = -1;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (GpuFitsRequest(gpus[i], request) &&
          (best < 0 || gpus[i].mig().used_compute() > gpus[best].mig().used_compute())) {
        best = static_cast<int>(i);
      }
    }
    if (best < 0) {
      return std::nullopt;
    }
    std::optional<int> start = gpus[best].mig().ChooseStart(*MigProfileOf(gpus[best], request));
    return GpuChoice{uint64_t{1} << best, *start};
  }
  if (request.gpu_milli == kWholeGpu) {
    std::optional<uint64_t> mask = PickWholeGpus(node, request);
    if (!mask) {
      return std::nullopt;
    }
    return GpuChoice{*mask, -1};
  }
  // A share of one GPU.
  int pick = -1;
  uint32_t fitting = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (!GpuFitsRequest(gpus[i], request)) {
      continue;
    }
    ++fitting;
    switch (selection) {
      case GpuSelection::kBestFit:
        if (pick < 0 || gpus[i].free_milli() < gpus[pick].free_milli()) {
          pick = static_cast<int>(i);
        }
        break;
      case GpuSelection::kRandom:
        // Reservoir sampling: each fitting GPU ends up chosen with probability 1/n.
        if (rng.Uniform(fitting) == 0) {
          pick = static_cast<int>(i);
        }
        break;
      case GpuSelection::kFirstFit:
        if (pick < 0) {
          pick = static_cast<int>(i);
        }
        break;
    }
  }
  if (pick < 0) {
    return std::nullopt;
  }
  return GpuChoice{uint64_t{1} << pick, -1};
}

StatusOr<Allocation> MakeAllocation(NodeId id, const NodeLedger& node, const TaskRequest& request,
                                    const GpuChoice& choice) {
  Allocation a;
  a.node = id;
  a.cpu = request.cpu;
  a.memory = request.memory;
  a.identity = request.fractional() ? request.identity : 0;
  if (request.cpu_only()) {
    if (!choice.empty()) {
      return InvalidArgumentError("a CPU-only task was given GPUs");
    }
    return a;
  }
  if (std::popcount(choice.mask) != request.gpu_count) {
    return InvalidArgumentError("GPU choice has " + std::to_string(std::popcount(choice.mask)) +
                                " GPUs; the task asks for " + std::to_string(request.gpu_count));
  }
  for (int i = 0; i < node.gpu_count(); ++i) {
    if ((choice.mask & (uint64_t{1} << i)) == 0) {
      continue;
    }
    GpuGrant g;
    g.gpu = i;
    if (request.wants_mig()) {
      const GpuLedger& gpu = node.gpus()[i];
      std::optional<int> p = MigProfileOf(gpu, request);
      if (!p) {
        return InvalidArgumentError("GPU " + std::to_string(i) + " has no MIG profile " +
                                    request.mig_profile);
      }
      const MigProfile& prof = gpu.model().mig_profiles[*p];
      g.milli = prof.ChargedMilli();
      g.memory = prof.memory;
      g.mig_profile = *p;
      g.mig_start = choice.mig_start;
    } else if (request.fractional()) {
      // A share books what its GPU's mode says (timeslice replicas, shared memory).
      const GpuLedger& gpu = node.gpus()[i];
      g.milli = gpu.BookedMilli(request.gpu_milli);
      g.memory = gpu.BookedMemory(request.gpu_milli, request.gpu_memory);
    } else {
      g.milli = request.gpu_milli;
      g.memory = request.gpu_memory;
    }
    a.gpus.push_back(g);
  }
  if (a.gpus.size() != static_cast<size_t>(request.gpu_count)) {
    return InvalidArgumentError("GPU choice names GPUs the node does not have");
  }
  return a;
}

}  // namespace tessera
