#include "server/node_jobs.h"

#include <string>

#include "api/units.h"

namespace tessera {

NodeJobStart PlanNodeJob(NodeId node, const NodeSpec& spec, const NodeLedger& ledger,
                         const NodeJob& request, const QueueTree& tree, Micros now) {
  NodeJobStart start;
  Allocation& a = start.allocation;
  a = Allocation{node, spec.cpu, spec.memory, {}};
  for (int g = 0; g < ledger.gpu_count(); ++g) {
    if (ledger.gpus()[static_cast<size_t>(g)].mode() != SharingMode::kMig) {
      a.gpus.push_back(GpuGrant{g, kWholeGpu, MiB(0), -1, -1});
    }
  }

  std::string queue = request.queue;
  if (queue.empty() || !tree.FindQueue(queue).ok()) {
    queue = tree.spec(tree.queues().front()).name;
  }
  JobSubmission& sub = start.submission;
  sub.spec.name = request.name;
  sub.spec.queue = queue;
  sub.spec.user = request.tenant;
  sub.spec.preemptible = false;
  sub.spec.runtime_limit = request.runtime_limit;
  sub.spec.submit_time = now;
  TaskRequest t;
  t.cpu = spec.cpu;
  t.memory = spec.memory;
  t.gpu_count = static_cast<int>(a.gpus.size());
  t.gpu_milli = t.gpu_count > 0 ? kWholeGpu : MilliGpu(0);
  t.topology = GpuTopology::kAny;
  sub.spec.tasks.push_back(t);
  sub.command = {"/bin/sh", "-c", request.command};
  sub.env = request.env;
  sub.hold_if_unfit = true;
  return start;
}

}  // namespace tessera
