// ModuleHost: the controller's feature modules in the order their hooks run, and the
// fan-out of each hook (modules/controller_module.h) to every one of them.
//
// Owns: the ordered list of modules, the modules handed to it (Add: the core's own that
// the controller never calls by name, modules/core_modules.h), and the attached modules'
// after-cycle callbacks. A module not handed to it (one the controller calls by name, or
// one attached, owned by a service) must outlive every call on the host; the
// destructor touches only the modules it owns. The controller builds the
// ModuleStep and the JobFacts a hook passes (it alone knows its tables) and calls the
// host with them.
// Order: the core's first module (Accounting, whose families lead the modules' part of
// /metrics), then the attached modules in the order attached, then the core's others.
// Every hook runs in that order, Stop in the reverse one (started last, stopped first);
// NodeHold is the first module's non-empty answer; DescribeJob, DescribeQueue and
// WriteMetrics add to one output in that order.
// Thread safety: none of its own. The list changes only in Attach, before the
// controller's loop starts; after that it is read-only. Every hook but Start, Stop and
// AfterCycle runs with the controller's core lock held; Start and Stop run on the
// controller's Start and Stop, AfterCycle on the loop's thread without the core lock.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/modules/controller_module.h"

namespace tessera {

class ModuleHost {
 public:
  ModuleHost() = default;
  // The core's own modules, in their order (the first one leads).
  explicit ModuleHost(std::vector<ControllerModule*> modules) : modules_(std::move(modules)) {}

  // `module` last in the order so far, owned by the host (destroyed with it).
  void Add(std::unique_ptr<ControllerModule> module);
  // `module` last in the order so far; it outlives every call on the host.
  void Add(ControllerModule& module) { modules_.push_back(&module); }

  // `module` after the first module and the modules attached before it; `after_cycle`
  // (may be empty) runs in AfterCycle. Its Load is the caller's.
  void Attach(ControllerModule& module, std::function<void()> after_cycle = nullptr);
  const std::vector<ControllerModule*>& modules() const { return modules_; }

  // At Open: each module's Load (the first error stops it), then the stored usage.
  Status Load(Store& store);
  void OnStoredUsage(const std::vector<UsageRow>& rows);

  void BeforeCycle(ModuleStep& step);
  void BeforeDecide(ModuleStep& step);
  void OnJobAccepted(const JobFacts& job, ModuleStep& step);
  void OnAttemptRunning(const JobFacts& job) const;
  void OnOutput(JobNumber job, Micros now);
  void OnTelemetry(const NodeInfo& node, const std::vector<GpuTelemetry>& sample,
                   bool comparable, ModuleStep& step);
  // Every module's OnUsage; then, `ended`, every module's OnIntervalEnded, so that the
  // row is complete when it is counted.
  void OnUsage(UsageRow& row, int attempt, bool ended) const;
  void OnAttemptEnded(const JobFacts& job, const EndedAttempt& ended,
                      nlohmann::json& stored_attempt, const ModuleStep& step);
  void DescribeJob(const JobFacts& job, nlohmann::json& out) const;
  void DescribeQueue(const std::string& queue, const std::string& queues_yaml,
                     nlohmann::json& out);
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const;
  // The first module's non-empty NodeHold of `node` ("": none holds it).
  std::string NodeHold(const std::string& node) const;
  void OnLaunch(const std::string& tenant, const JobSubmission& job, TaskLaunch& launch) const;
  // Whether any module's view of the job changed (every module hears the report).
  bool OnTaskReport(const TaskReport& report);
  // The first module's non-empty JobNote ("": none has one).
  std::string JobNote(JobNumber job, int attempt) const;
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event, const QueueTree& tree);
  void OnNodeJoined(const NodeInventory& inventory, ModuleStep& step);
  void OnNodeRemoved(const std::string& name, ModuleStep& step);

  void Start();
  void Stop();
  // The attached modules' after-cycle callbacks, in the order attached.
  void AfterCycle();

 private:
  std::vector<ControllerModule*> modules_;
  std::vector<std::unique_ptr<ControllerModule>> owned_;  // of modules_, those handed over
  size_t attached_ = 0;  // modules attached (after the first)
  std::vector<std::function<void()>> after_cycle_;
};

}  // namespace tessera
