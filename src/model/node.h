// NodeSpec: what a machine has. Immutable description; the free/used view lives in
// state/NodeLedger.
//
// Topology inside a node: each GPU sits on a NUMA node and in an NVLink domain
// (GPUs joined by NVLink or an NVSwitch; -1 when the GPU has no NVLink peers).
// Labels carry the levels above the node (rack, zone, block). Quantities are
// integers. Thread safety: values.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/quantity.h"
#include "base/status.h"
#include "base/strong_id.h"
#include "model/gpu_catalog.h"

namespace tessera {

// How a GPU is handed out.
enum class SharingMode {
  kExclusive,  // whole cards only
  kMig,        // hardware MIG instances, created on demand
  kShared,     // software shares: milli-GPU compute plus a memory cap (MPS and the limiter)
  // N replicas taken in turn (the device plugin's time-slicing): shares only, each of
  // whole replicas; no memory or fault isolation, so GPU memory is not booked.
  kTimeslice,
};

std::string_view SharingModeName(SharingMode mode);
StatusOr<SharingMode> ParseSharingMode(std::string_view name);
// Whether the mode hands out software shares (shared, timeslice).
inline bool TakesShares(SharingMode mode) {
  return mode == SharingMode::kShared || mode == SharingMode::kTimeslice;
}

inline constexpr int kMinTimesliceReplicas = 2;
inline constexpr int kMaxTimesliceReplicas = 64;

// A GPU's mode with its replicas (timeslice only; 0 otherwise).
struct GpuSharing {
  SharingMode mode = SharingMode::kExclusive;
  int replicas = 0;
  bool operator==(const GpuSharing&) const = default;
};
// "exclusive", "mig", "shared", or "timeslice=N" / "timeslice:N" with N in 2..64.
StatusOr<GpuSharing> ParseGpuSharing(std::string_view text);
// The inverse: "timeslice=4", "shared", ...
std::string GpuSharingText(const GpuSharing& sharing);

struct GpuSpec {
  GpuModelId model;
  SharingMode mode = SharingMode::kShared;
  int numa_node = 0;
  int nvlink_domain = -1;  // -1: no NVLink
  int replicas = 0;        // timeslice only: 2..64 (ValidateNodeSpec); 0 in other modes
  bool operator==(const GpuSpec&) const = default;
};

struct NodeSpec {
  std::string name;
  MilliCpu cpu{0};
  MiB memory{0};
  int numa_nodes = 1;
  std::vector<GpuSpec> gpus;
  std::vector<std::pair<std::string, std::string>> labels;  // e.g. {"rack", "r12"}

  // The label's value, or "" when absent.
  std::string_view Label(std::string_view key) const;
  // Whether every GPU of the node is of one model (true for a node without GPUs).
  bool Homogeneous() const;
  bool operator==(const NodeSpec&) const = default;
};

// Labels the agent sets on nodes with shared GPUs (agent/agent_gpu_shares.h): "mps" is
// "on" while an MPS control daemon serves every shared GPU ("off", "unavailable"
// otherwise); "mps-multi-user" is "on" when the admin says the node's MPS serves
// clients of several Unix users at once (`tessera agent --mps-multi-user`).
inline constexpr std::string_view kMpsLabel = "mps";
inline constexpr std::string_view kMpsMultiUserLabel = "mps-multi-user";
// Set by an agent that runs tasks in OCI images (agent/runtime/container_runtime.h), to
// its runtime's name ("podman"); a job with an image goes only to such nodes.
inline constexpr std::string_view kContainersLabel = "containers";
// Whether the node's shared GPUs are served by single-user MPS: NVIDIA's control daemon
// runs one server per GPU for one uid at a time, and a client of another uid waits until
// that server's clients are done. True for "mps=on" without "mps-multi-user=on".
bool MpsServesOneUser(const NodeSpec& spec);

// Checks a spec for impossible values (negative capacity, NUMA index out of range,
// MIG mode on a model without MIG, timeslice replicas outside 2..64). Returns
// InvalidArgument with the reason.
Status ValidateNodeSpec(const NodeSpec& spec, const GpuCatalog& catalog);

// A node of `gpu_count` GPUs of one model, split evenly over `numa_nodes` NUMA nodes,
// all in one NVLink domain when `nvlink` is set. Used by tests, benchmarks and the
// `--cluster` shorthand.
NodeSpec MakeUniformNode(std::string name, MilliCpu cpu, MiB memory, GpuModelId model,
                         int gpu_count, SharingMode mode, int numa_nodes = 1, bool nvlink = false);

}  // namespace tessera
