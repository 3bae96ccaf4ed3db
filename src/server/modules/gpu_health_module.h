// GpuHealthModule: GPUs judged from the agents' telemetry (modules/gpu_health.h), drained
// when they fail, and the work on a GPU whose failure ends it stopped.
//
// Owns: the health thresholds and the count of jobs stopped by a GPU fault, by kind.
// Hooks: OnTelemetry (each GPU of the sample judged against the node's previous one),
// WriteMetrics (tessera_job_gpu_faults_total).
// Invariants:
//   - a GPU without a drain that shows a finding is drained by "health" with the
//     finding's kind, before any job on it is stopped (the drain keeps the next attempt
//     off it); a temperature drain lifts itself once the GPU cools to the resume
//     threshold, and a worse finding replaces it; other drains are lifted only by an
//     admin;
//   - a finding that ends the work (FaultEndsWork) stops every job with an unfinished
//     task on the GPU, through the attempt machine as a requeue with cause gpu-fault
//     and the stop grace (the restart policy decides between requeue and failure); a
//     job whose end is decided already is left to it and not counted.
// Thread safety: none; the controller calls it with its core lock held.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/modules/controller_module.h"
#include "server/modules/gpu_health.h"

namespace tessera {

class GpuHealthModule final : public ControllerModule {
 public:
  explicit GpuHealthModule(GpuHealthOptions options = {}) : options_(options) {}
  void OnTelemetry(const NodeInfo& node, const std::vector<GpuTelemetry>& sample,
                   bool comparable, ModuleStep& step) override;
  void WriteMetrics(const ModuleStep& step, MetricsWriter& w) const override;

 private:
  // The jobs holding `gpu` of `node` with a task still running are stopped.
  void StopWorkOn(const std::string& node, int gpu, const HealthFinding& finding,
                  ModuleStep& step);
  void Drain(const std::string& node, int gpu, const HealthFinding& finding, ModuleStep& step);

  GpuHealthOptions options_;
  std::map<std::string, uint64_t> faults_;  // jobs stopped by a GPU fault, by finding kind
};

}  // namespace tessera
