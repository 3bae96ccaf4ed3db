#include "state/gpu_ledger.h"

#include <algorithm>

namespace tessera {

GpuLedger::GpuLedger(const GpuModel* model, SharingMode mode, int replicas)
    : model_(model), mode_(mode), replicas_(mode == SharingMode::kTimeslice ? replicas : 0),
      mig_(model) {}

int GpuLedger::ReplicasFor(MilliGpu milli) const {
  if (replicas_ <= 0 || milli.value() <= 0) {
    return 0;
  }
  return static_cast<int>((milli.value() * replicas_ + kMilliPerGpu - 1) / kMilliPerGpu);
}

MilliGpu GpuLedger::BookedMilli(MilliGpu milli) const {
  if (mode_ != SharingMode::kTimeslice || replicas_ <= 0) {
    return milli;
  }
  // Rounded down so that N one-replica shares never book more than the card; the
  // replica count of a booked amount is the same as of the amount asked.
  return MilliGpu(int64_t{ReplicasFor(milli)} * kMilliPerGpu / replicas_);
}

MiB GpuLedger::BookedMemory(MilliGpu milli, MiB memory) const {
  if (mode_ == SharingMode::kTimeslice) {
    return MiB(0);
  }
  if (mode_ == SharingMode::kShared && memory.value() == 0 && milli < kWholeGpu) {
    return MiB(milli.value() * model_->memory.value() / kMilliPerGpu);
  }
  return memory;
}

bool GpuLedger::FitsShare(MilliGpu milli, MiB memory) const {
  if (mode_ == SharingMode::kTimeslice) {
    // Memory is not booked, but a request the card could never hold does not fit.
    if (memory.value() > 0 && model_->memory.value() > 0 && memory > model_->memory) {
      return false;
    }
    return milli < kWholeGpu && FitsGrant(BookedMilli(milli), MiB(0));
  }
  return FitsGrant(milli, BookedMemory(milli, memory));
}

bool GpuLedger::FitsGrant(MilliGpu milli, MiB memory) const {
  switch (mode_) {
    case SharingMode::kMig:
      return false;
    case SharingMode::kExclusive:
      return grants_ == 0 && milli == kWholeGpu &&
             (memory.value() == 0 || memory <= model_->memory);
    case SharingMode::kShared:
      return milli.value() > 0 && used_milli_ + milli.value() <= kMilliPerGpu &&
             (memory.value() == 0 || used_memory_ + memory.value() <= model_->memory.value());
    case SharingMode::kTimeslice:
      return milli.value() > 0 && milli < kWholeGpu && memory.value() == 0 &&
             used_replicas_ + ReplicasFor(milli) <= replicas_ &&
             used_milli_ + milli.value() <= kMilliPerGpu;
  }
  return false;
}

bool GpuLedger::AdmitsIdentity(uint64_t identity) const {
  if (!one_user_ || identity == 0) {
    return true;
  }
  return std::all_of(identities_.begin(), identities_.end(),
                     [&](const auto& e) { return e.first == identity; });
}

void GpuLedger::CountIdentity(uint64_t identity, int delta) {
  if (identity == 0 || mode_ != SharingMode::kShared) {
    return;
  }
  auto it = std::lower_bound(identities_.begin(), identities_.end(), identity,
                             [](const auto& e, uint64_t id) { return e.first < id; });
  if (it == identities_.end() || it->first != identity) {
    it = identities_.insert(it, {identity, 0});
  }
  it->second += delta;
  if (it->second <= 0) {
    identities_.erase(it);
  }
}

Status GpuLedger::Allocate(const GpuGrant& grant, uint64_t identity) {
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
  } else if (mode_ == SharingMode::kTimeslice &&
             (grant.memory.value() != 0 || grant.milli != BookedMilli(grant.milli))) {
    return InvalidArgumentError("GPU " + std::to_string(grant.gpu) +
                                " is in timeslice mode: a grant books whole replicas (" +
                                std::to_string(grant.milli.value()) + " milli is not) and no "
                                "memory");
  } else if (!FitsGrant(grant.milli, grant.memory)) {
    return ResourceExhaustedError(
        "GPU " + std::to_string(grant.gpu) + " has " + std::to_string(kMilliPerGpu - used_milli_) +
        " milli and " + std::to_string(model_->memory.value() - used_memory_) +
        " MiB free; grant asks for " + std::to_string(grant.milli.value()) + " milli and " +
        std::to_string(grant.memory.value()) + " MiB");
  }
  used_replicas_ += ReplicasFor(grant.milli);
  used_milli_ += static_cast<int32_t>(grant.milli.value());
  used_memory_ += grant.memory.value();
  ++grants_;
  CountIdentity(identity, +1);
  return Status::Ok();
}

Status GpuLedger::Release(const GpuGrant& grant, uint64_t identity) {
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
  if (ReplicasFor(grant.milli) > used_replicas_) {
    return FailedPreconditionError("release of GPU " + std::to_string(grant.gpu) +
                                   " frees more replicas than are taken");
  }
  used_replicas_ -= ReplicasFor(grant.milli);
  used_milli_ -= static_cast<int32_t>(grant.milli.value());
  used_memory_ -= grant.memory.value();
  --grants_;
  CountIdentity(identity, -1);
  return Status::Ok();
}

bool GpuLedger::operator==(const GpuLedger& other) const {
  if (model_ != other.model_ || mode_ != other.mode_ || replicas_ != other.replicas_ ||
      used_replicas_ != other.used_replicas_ || used_milli_ != other.used_milli_ ||
      used_memory_ != other.used_memory_ || grants_ != other.grants_ || drained_ != other.drained_ ||
      one_user_ != other.one_user_ || identities_ != other.identities_ ||
      mig_.used_slots() != other.mig_.used_slots() ||
      mig_.used_compute() != other.mig_.used_compute()) {
    return false;
  }
  return true;
}

}  // namespace tessera
