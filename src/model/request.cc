#include "model/request.h"

namespace tessera {

uint64_t TenantIdentity(std::string_view tenant) {
  uint64_t h = 14695981039346656037ULL;
  for (char c : tenant) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;
  }
  return h == 0 ? 1 : h;
}

MilliGpu TaskRequest::TotalGpuMilli(const GpuCatalog& catalog) const {
  if (gpu_count == 0) {
    return MilliGpu(0);
  }
  if (wants_mig()) {
    for (const GpuModel& m : catalog.models()) {
      if (!models.Allows(m.id)) {
        continue;
      }
      if (auto idx = m.FindMigProfile(mig_profile)) {
        return m.mig_profiles[*idx].ChargedMilli();
      }
    }
    return MilliGpu(0);
  }
  return gpu_milli * gpu_count;
}

Status ValidateTaskRequest(const TaskRequest& r, const GpuCatalog& catalog,
                           const RequestLimits& limits) {
  if (r.cpu.value() < 0) {
    return InvalidArgumentError("cpu must not be negative, got " + ToString(r.cpu));
  }
  if (r.cpu > limits.max_cpu) {
    return InvalidArgumentError("cpu " + ToString(r.cpu) + " is beyond the limit of " +
                                ToString(limits.max_cpu));
  }
  if (r.memory.value() < 0) {
    return InvalidArgumentError("memory must not be negative, got " + ToString(r.memory));
  }
  if (r.memory > limits.max_memory) {
    return InvalidArgumentError("memory " + ToString(r.memory) + " is beyond the limit of " +
                                ToString(limits.max_memory));
  }
  if (r.gpu_count < 0 || r.gpu_count > limits.max_gpus_per_task) {
    return InvalidArgumentError("gpu_count must be in 0.." +
                                std::to_string(limits.max_gpus_per_task) + ", got " +
                                std::to_string(r.gpu_count));
  }
  if (r.gpu_memory.value() < 0) {
    return InvalidArgumentError("gpu_memory must not be negative");
  }
  if (r.gpu_count == 0) {
    if (r.gpu_milli.value() != 0 || r.gpu_memory.value() != 0 || r.wants_mig()) {
      return InvalidArgumentError(
          "a task with gpu_count 0 cannot ask for gpu_milli, gpu_memory or a MIG profile");
    }
    return Status::Ok();
  }
  if (r.wants_mig()) {
    if (r.gpu_count != 1) {
      return InvalidArgumentError("a MIG task takes exactly one instance (gpu_count 1), got " +
                                  std::to_string(r.gpu_count));
    }
    // One form per request, so that equal requests compare equal: the profile alone
    // sizes a MIG instance.
    if (r.gpu_milli.value() != 0 || r.gpu_memory.value() != 0) {
      return InvalidArgumentError(
          "a MIG instance is sized by its profile: gpu_milli and gpu_memory must be 0");
    }
    bool found = false;
    for (const GpuModel& m : catalog.models()) {
      if (r.models.Allows(m.id) && m.FindMigProfile(r.mig_profile)) {
        found = true;
        break;
      }
    }
    if (!found) {
      return InvalidArgumentError("MIG profile '" + r.mig_profile +
                                  "' does not exist on any allowed GPU model");
    }
    return Status::Ok();
  }
  if (r.gpu_milli.value() <= 0 || r.gpu_milli > kWholeGpu) {
    return InvalidArgumentError("gpu_milli must be in 1..1000, got " +
                                std::to_string(r.gpu_milli.value()));
  }
  if (r.gpu_count > 1 && r.gpu_milli != kWholeGpu) {
    return InvalidArgumentError("a task with " + std::to_string(r.gpu_count) +
                                " GPUs takes whole GPUs: gpu_milli must be 1000, got " +
                                std::to_string(r.gpu_milli.value()));
  }
  return Status::Ok();
}

}  // namespace tessera
