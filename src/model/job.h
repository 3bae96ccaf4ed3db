// JobSpec: what a user submits: a gang of tasks for one queue, with the facts the
// scheduler uses to order, place, preempt and backfill it.
//
// All tasks of a job start together or not at all. The topology policy says how
// close together the tasks must be (hard) or should be (soft). A job that declares
// a checkpoint interval loses at most that much work when preempted; one that
// checkpoints on signal loses nothing if the grace period is long enough.
// Thread safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/request.h"

namespace tessera {

// How close a gang's tasks must be: on one node, one NVLink domain (nodes sharing
// the node label "nvlink-domain", else one node), one rack (label "rack"), one block
// (label "block": a block holds racks), anywhere. Nodes without the scope's label
// form groups of their own. Values are kept stable (kBlock came last); the order
// from tightest to widest is node, nvlink, rack, block, any.
enum class TopologyScope : uint8_t { kAny, kRack, kNvlinkDomain, kNode, kBlock };

std::string_view TopologyScopeName(TopologyScope scope);
StatusOr<TopologyScope> ParseTopologyScope(std::string_view text);

struct TopologyPolicy {
  TopologyScope scope = TopologyScope::kAny;
  bool hard = false;  // hard: wait rather than spread wider; soft: prefer, then spread
};

struct JobSpec {
  std::string name;
  std::string queue;  // leaf queue of the QueueTree
  std::string user;   // for runtime prediction; "" is fine
  int32_t priority = 0;
  std::vector<TaskRequest> tasks;  // the gang, >= 1 task
  TopologyPolicy topology;
  Micros submit_time = 0;
  Micros runtime_limit = 0;        // the user's wall-time limit; 0: none
  Micros checkpoint_interval = 0;  // periodic checkpoints of progress; 0: none
  bool checkpoint_on_signal = false;  // saves its progress when asked to stop
  bool preemptible = true;

  int64_t TotalGpuMilli(const GpuCatalog& catalog) const;
  int TotalGpus() const;  // GPUs touched (a share counts as one)
};

// Stamps `identity` (TenantIdentity of the job's tenant) on the job's fractional tasks,
// and 0 on the others (only shares meet on one GPU). Idempotent.
void SetShareIdentity(JobSpec& spec, uint64_t identity);

// InvalidArgument naming the field, for specs from users.
Status ValidateJobSpec(const JobSpec& spec, const GpuCatalog& catalog,
                       const RequestLimits& limits = {});

}  // namespace tessera
