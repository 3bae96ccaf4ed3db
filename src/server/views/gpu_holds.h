// Who holds each GPU now, as the views show it: the grants of running tasks by (node,
// GPU index). Gathered under the controller's lock (NodeUseOf, node_views.h); the
// pointers are into its job table and are read before the lock is let go.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "state/gpu_ledger.h"
#include "server/job_number.h"
#include "store/store.h"

namespace tessera {

struct GpuHold {
  JobNumber job;
  const JobRow* row;       // the job's name, tenant, queue
  const GpuGrant* grant;   // what it holds of the GPU
};
using GpuHolds = std::map<std::pair<std::string, int>, std::vector<GpuHold>>;

}  // namespace tessera
