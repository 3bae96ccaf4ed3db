// GpuSharingConfig: the agent's --gpu-sharing override of the sharing mode its GPUs
// report (NVML reports every GPU exclusive or mig; a fake spec may say more).
//
// Spec: items separated by ';', each "GPUS=MODE". GPUS is "all" or a comma list of
// indices and ranges ("0,1", "0-3"); MODE is exclusive, shared, or timeslice:N
// (also timeslice=N) with N replicas in 2..64. Later items win for the GPUs they name.
//   "all=shared"   "0,1=shared;2=timeslice:4"   "0-3=exclusive"
// MIG is not set here (it follows the driver: nvidia-smi -mig). "all" leaves GPUs in
// MIG mode as they are; naming one is an error. Thread safety: values, pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "base/status.h"
#include "model/node.h"

namespace tessera {

struct GpuSharingItem {
  std::string text;       // as written, for messages
  bool all = false;       // every GPU not in MIG mode
  std::vector<int> gpus;  // else these indices, ascending, no repeats
  GpuSharing sharing;
};

struct GpuSharingConfig {
  std::vector<GpuSharingItem> items;
  bool empty() const { return items.empty(); }
};

// "" is an empty config. InvalidArgument naming the item: unknown mode, mig, a bad
// index or range, replicas outside 2..64.
StatusOr<GpuSharingConfig> ParseGpuSharingConfig(std::string_view spec);

// Sets the mode and replicas of the GPUs the config names, in place. A named GPU that
// does not exist or is in MIG mode keeps what the driver reports; each such problem is
// returned as a message naming the GPU and the item (at start-up the agent refuses to
// run with any; after a later discovery it reports the GPU as it is and logs them).
std::vector<std::string> ApplyGpuSharingConfig(const GpuSharingConfig& config,
                                               std::vector<DiscoveredGpu>* gpus);

}  // namespace tessera
