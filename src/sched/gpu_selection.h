// Picking GPUs inside one node, and turning the pick into ledger grants.
//
// Whole GPUs are taken from the most local group that can hold them all: one NVLink
// domain on one NUMA node, else one NVLink domain, else one NUMA node, else any;
// among groups that can, the one with the fewest free GPUs (keeping large groups
// whole for large tasks); inside it, the lowest indices. Shares follow the
// Profile's GpuSelection. A MIG instance goes to the busiest MIG GPU that can take
// it, at the start slot MigLayout::ChooseStart picks. Thread safety: pure functions.
#pragma once

#include <optional>

#include "base/rng.h"
#include "base/status.h"
#include "model/request.h"
#include "sched/framework.h"
#include "state/node_ledger.h"

namespace tessera {

// Whether `gpu` (of the request's allowed models) could take one GPU's part of the
// request now: GpuHasRoomFor, and for a share, a GPU whose single-user MPS admits the
// share's identity (GpuLedger::AdmitsIdentity). Every pick of a GPU goes through this.
bool GpuFitsRequest(const GpuLedger& gpu, const TaskRequest& request);
// Room now (not drained, an allowed model, the mode's capacity), whoever holds it.
bool GpuHasRoomFor(const GpuLedger& gpu, const TaskRequest& request);
// A share that has room on `gpu` but may not join it now: its single-user MPS serves
// shares of another identity (a "not now" of its own, for reasons).
bool GpuHeldByAnotherUser(const GpuLedger& gpu, const TaskRequest& request);

// Whole GPUs: the mask of `count` GPUs chosen by the locality rule above, or
// nullopt when fewer than `count` whole GPUs are free.
std::optional<uint64_t> PickWholeGpus(const NodeLedger& node, const TaskRequest& request);

// Locality of a set of GPUs: 0 one NVLink domain and one NUMA node, 1 one NVLink
// domain, 2 one NUMA node, 3 spread. Lower is better.
int GpuSetLocality(const NodeLedger& node, uint64_t mask);

// The best locality any `count` free GPUs of the node could have now (4 if none).
int BestWholeGpuLocality(const NodeLedger& node, const TaskRequest& request);

// GPUs for the request on this node, or nullopt when it does not fit.
std::optional<GpuChoice> SelectGpus(const NodeLedger& node, const TaskRequest& request,
                                    GpuSelection selection, Rng& rng);

// The allocation that gives `request` the GPUs of `choice` on node `id`.
StatusOr<Allocation> MakeAllocation(NodeId id, const NodeLedger& node, const TaskRequest& request,
                                    const GpuChoice& choice);

}  // namespace tessera
