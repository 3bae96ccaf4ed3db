#include "server/modules/gpu_health_module.h"

#include <iostream>

namespace tessera {

void GpuHealthModule::Drain(const std::string& node, int gpu, const HealthFinding& finding,
                            ModuleStep& step) {
  step.SetDrain(node, gpu,
                DrainInfo{finding.reason, "health", std::string(HealthKindName(finding.kind)),
                          step.now()});
  if (FaultEndsWork(finding)) {
    StopWorkOn(node, gpu, finding, step);
  }
}

void GpuHealthModule::OnTelemetry(const NodeInfo& node, const std::vector<GpuTelemetry>& sample,
                                  bool comparable, ModuleStep& step) {
  const std::string& name = node.inventory.spec.name;
  for (size_t g = 0; g < sample.size(); ++g) {
    const GpuTelemetry& now_sample = sample[g];
    const GpuTelemetry* previous =
        comparable && g < node.telemetry.size() ? &node.telemetry[g] : nullptr;
    const int index = static_cast<int>(g);
    const std::optional<HealthFinding> finding = CheckGpuHealth(previous, now_sample, options_);
    auto existing = node.gpu_drains.find(index);
    const bool too_hot = existing != node.gpu_drains.end() &&
                         existing->second.kind == HealthKindName(HealthKind::kTemperature);
    if (existing == node.gpu_drains.end()) {
      if (finding) {
        Drain(name, index, *finding, step);
      }
    } else if (too_hot && !now_sample.lost &&
               now_sample.temp_c <= options_.temperature_resume_c) {
      step.SetDrain(name, index, std::nullopt);  // cooled down
    } else if (too_hot && finding && finding->kind != HealthKind::kTemperature) {
      Drain(name, index, *finding, step);  // a worse finding: it would not lift itself
    }
  }
}

void GpuHealthModule::StopWorkOn(const std::string& node, int gpu, const HealthFinding& finding,
                                 ModuleStep& step) {
  const std::string where = finding.reason + " on node " + node + " GPU " + std::to_string(gpu);
  std::vector<JobNumber> holders;
  step.ForEachRunningJob([&](const JobFacts& job) {
    const JobRecord& rec = *job.record;
    bool holds = false;
    for (size_t t = 0; t < job.tasks && t < rec.allocations.size(); ++t) {
      const bool exited = t >= rec.attempt.tasks.size() || rec.attempt.tasks[t].exited;
      if (job.task_node(t) != node || exited) {
        continue;
      }
      for (const GpuGrant& g : rec.allocations[t].gpus) {
        holds = holds || g.gpu == gpu;
      }
    }
    if (holds && rec.attempt.after == AttemptEnd::kNone) {  // else its end is decided already
      holders.push_back(job.id);
    }
  });
  for (JobNumber id : holders) {
    ++faults_[std::string(HealthKindName(finding.kind))];
    std::cerr << "tessera server: job " << ToString(id) << " stops: GPU fault: " << where << "\n";
    // Every task of the gang gets the preemption signal and the grace to checkpoint.
    step.Stop(id,
              StopRequest{AttemptEnd::kRequeue, RequeueCause::kGpuFault, step.stop_grace(),
                          "requeued: gpu-fault: " + where},
              "");
  }
}

void GpuHealthModule::WriteMetrics(const ModuleStep& step, MetricsWriter& w) const {
  (void)step;
  w.Family("tessera_job_gpu_faults_total", MetricType::kCounter,
           "Jobs stopped and requeued (or failed) because a GPU they held failed, by finding "
           "kind (xid, ecc, lost), since the controller started.");
  for (const char* kind : {"lost", "xid", "ecc"}) {
    auto it = faults_.find(kind);
    w.Sample({{"kind", kind}}, static_cast<double>(it != faults_.end() ? it->second : 0));
  }
}

}  // namespace tessera
