// The seams between the controller's core and its feature modules.
//
// The core (server/controller.h) holds the core lock, the pending transaction of each
// locked step, publishing and the scheduling loop. A feature (idle watch, node
// history, ...) is a ControllerModule: it owns its state and its invariants, and the
// core calls it only through the hooks declared here. A module never sees the core's
// tables: it reads jobs and nodes through the const views a hook passes (JobFacts, the
// node's NodeInfo), and acts only through ModuleStep, the locked step it runs in: a
// stop asked of the attempt machine, a job's view republished, rows added to the
// step's durable batch. Modules do not call one another; what one needs of another
// goes through the core.
//
// Hooks (all but Start/Stop run with the core lock held, in the order modules were
// attached):
//   Load          at Open, before jobs are loaded: the module's durable state
//   BeforeCycle   each scheduling cycle, before the core decides
//   OnOutput      a task's output grew (an agent's report)
//   OnUsage       an interval of GPU use, ended or still running, is counted or shown
//   DescribeJob   a job's JSON view is built
//   DescribeQueue a queue's JSON view is built
//   WriteMetrics  /metrics is scraped
//   Start / Stop  the controller's loop starts and stops (threads the module owns)
// Each module's header says which hooks it uses and what it owns.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "metrics/exposition.h"
#include "sched/attempt_machine.h"
#include "sched/job_record.h"
#include "server/job_number.h"
#include "server/job_state.h"
#include "store/store.h"

namespace tessera {

struct NodeInfo;  // server/node_registry.h

// A job as a module sees it: read-only, valid for the hook call only.
struct JobFacts {
  JobNumber id;
  const std::string& tenant;
  const std::string& queue;
  int attempt;               // the attempt's number (the row's attempts)
  JobState state;
  // The core's record (phase, allocations, run_start, gpu_milli); null for a finished
  // job read back from the store.
  const JobRecord* record;
  size_t tasks;  // of the current attempt
  // The node of each task of the current attempt, by task index (< tasks).
  std::function<const std::string&(size_t task)> task_node;
};

// The locked step a hook runs in: what a module may read and do of the core.
class ModuleStep {
 public:
  virtual ~ModuleStep() = default;
  virtual Micros now() const = 0;
  // The queue configuration as the core runs it (YAML text).
  virtual const std::string& queues_yaml() const = 0;
  // Every acknowledged job in memory that is running or stopping, in id order.
  virtual void ForEachRunningJob(const std::function<void(const JobFacts&)>& visit) const = 0;
  // A node known to the core, up or down; null for an unknown one.
  virtual const NodeInfo* Node(const std::string& name) const = 0;
  // How long a node may be silent before it is lost (ControllerOptions::node_timeout).
  virtual Micros node_timeout() const = 0;
  // The grace a stop gives tasks when nothing else says (ControllerOptions::stop_grace).
  virtual Micros stop_grace() const = 0;
  // Asks the job's attempt to stop (sched/attempt_machine.h decides what the stop
  // ends as). `reason` non-empty: the job's reason from now on (an end's reason from
  // the machine replaces it). No effect on a job that is not running or stopping.
  virtual void Stop(JobNumber job, const StopRequest& request, const std::string& reason) = 0;
  // The job's published view changed (a figure the module adds to it).
  virtual void Republish(JobNumber job) = 0;
  // Rows made durable with the step (before anything it decided is handed out).
  virtual WriteBatch& batch() = 0;
};

class ControllerModule {
 public:
  virtual ~ControllerModule() = default;
  virtual Status Load(Store& store) {
    (void)store;
    return Status::Ok();
  }
  virtual void BeforeCycle(ModuleStep& step) { (void)step; }
  virtual void OnOutput(JobNumber job, Micros now) {
    (void)job;
    (void)now;
  }
  // Attempt `attempt` of `row.job` held `row.gpu_milli` over the row's interval:
  // `row.used_gpu_milli` may be filled in. `ended`: the interval is over and stored.
  virtual void OnUsage(UsageRow& row, int attempt, bool ended) {
    (void)row;
    (void)attempt;
    (void)ended;
  }
  virtual void DescribeJob(const JobFacts& job, nlohmann::json& out) const {
    (void)job;
    (void)out;
  }
  virtual void DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                             nlohmann::json& out) {
    (void)queue;
    (void)queues_yaml;
    (void)out;
  }
  virtual void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
    (void)step;
    (void)w;
  }
  virtual void Start() {}
  virtual void Stop() {}
};

}  // namespace tessera
