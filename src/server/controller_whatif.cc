// GET /v1/admin/history (cluster_history.h): the policy as it runs, copied under the
// core lock; the rest is read from the store without it.
#include "server/cluster_history.h"
#include "server/controller.h"

namespace tessera {

StatusOr<nlohmann::json> Controller::History(Micros since, Micros until, uint64_t after,
                                             int64_t limit) {
  HistoryPolicy policy;
  {
    MutexLock lock(mu_);
    const SchedulerOptions& o = core_.policy().options;
    policy.policy = {{"name", core_.policy().name},
                     {"placement", options_.placement},
                     {"seed", options_.seed},
                     {"restart_overhead_us", o.restart_overhead},
                     {"checkpoint_wait_us", o.checkpoint_wait},
                     {"min_run_before_reclaim_us", o.min_run_before_reclaim},
                     {"victim_hold_us", o.victim_hold},
                     {"grace_us", o.grace}};
    policy.queues_yaml = core_.queues_yaml();
  }
  return ClusterHistoryPage(*store_, policy, since, until, after, limit);
}

}  // namespace tessera
