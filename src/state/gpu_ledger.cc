#include "state/gpu_ledger.h"

namespace tessera {

GpuLedger::GpuLedger(const GpuModel* model, SharingMode mode)
    : model_(model), mode_(mode), mig_(model) {}

bool GpuLedger::FitsShare(MilliGpu milli, MiB memory) const {
  switch (mode_) {
    case SharingMode::kMig:
      return false;
    case SharingMode::kExclusive:
      return grants_ == 0 && milli == kWholeGpu &&
             (memory.value() == 0 || memory <= model_->memory);
    case SharingMode::kShared:
      return milli.value() > 0 && used_milli_ + milli.value() <= kMilliPerGpu &&
             (memory.value() == 0 || used_memory_ + memory.value() <= model_->memory.value());
  }
  return false;
}

Status GpuLedger::Allocate(const GpuGrant& grant) {
  if (grant.milli.value() < 0 || grant.memory.value() < 0) {
    return InvalidArgumentError("negative GPU grant");
  }
  if (grant.is_mig()) {
    if (mode_ != SharingMode::kMig) {
      return FailedPreconditionError("GPU " + std::to_string(grant.gpu) + " (" + model_->name +
                                     ") is not in MIG mode");
    }
    if (grant.mig_profile >= static_cast<int>(model_->mig_profiles.size())) {
      return InvalidArgumentError("unknown MIG profile index");
    }
    const MigProfile& p = model_->mig_profiles[grant.mig_profile];
    if (grant.milli != p.ChargedMilli() || grant.memory != p.memory) {
      return InvalidArgumentError("MIG grant charges do not match profile " + p.name);
    }
    Status s = mig_.Add({grant.mig_profile, grant.mig_start});
    if (!s.ok()) {
      return s;
    }
  } else if (!FitsShare(grant.milli, grant.memory)) {
    return ResourceExhaustedError(
        "GPU " + std::to_string(grant.gpu) + " has " + std::to_string(kMilliPerGpu - used_milli_) +
        " milli free; grant asks for " + std::to_string(grant.milli.value()));
  }
  used_milli_ += static_cast<int32_t>(grant.milli.value());
  used_memory_ += grant.memory.value();
  ++grants_;
  return Status::Ok();
}

Status GpuLedger::Release(const GpuGrant& grant) {
  if (grants_ == 0 || grant.milli.value() > used_milli_ || grant.memory.value() > used_memory_ ||
      grant.milli.value() < 0 || grant.memory.value() < 0) {
    return FailedPreconditionError("release of GPU " + std::to_string(grant.gpu) +
                                   " does not match what is allocated on it");
  }
  if (grant.is_mig()) {
    Status s = mig_.Remove({grant.mig_profile, grant.mig_start});
    if (!s.ok()) {
      return s;
    }
  }
  used_milli_ -= static_cast<int32_t>(grant.milli.value());
  used_memory_ -= grant.memory.value();
  --grants_;
  return Status::Ok();
}

bool GpuLedger::operator==(const GpuLedger& other) const {
  if (model_ != other.model_ || mode_ != other.mode_ || used_milli_ != other.used_milli_ ||
      used_memory_ != other.used_memory_ || grants_ != other.grants_ || drained_ != other.drained_ ||
      mig_.used_slots() != other.mig_.used_slots() ||
      mig_.used_compute() != other.mig_.used_compute()) {
    return false;
  }
  return true;
}

}  // namespace tessera
