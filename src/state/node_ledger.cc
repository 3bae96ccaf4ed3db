#include "state/node_ledger.h"

#include <algorithm>

namespace tessera {

MilliGpu Allocation::TotalGpuMilli() const {
  MilliGpu total(0);
  for (const GpuGrant& g : gpus) {
    total += g.milli;
  }
  return total;
}

int Allocation::Shape() const {
  if (gpus.empty()) {
    return kShapeCpuOnly;
  }
  if (gpus.size() == 1 && gpus[0].is_mig()) {
    return kShapeMig;
  }
  if (gpus.size() == 1 && gpus[0].milli < kWholeGpu) {
    return kShapeShare;
  }
  return static_cast<int>(gpus.size());
}

int NodeLedger::ShapeCount(int shape) const {
  for (const auto& [s, n] : shape_counts_) {
    if (s == shape) {
      return n;
    }
  }
  return 0;
}

bool NodeLedger::HasGpuAllocations() const {
  for (const auto& [s, n] : shape_counts_) {
    if (s != kShapeCpuOnly && n > 0) {
      return true;
    }
  }
  return false;
}

void NodeLedger::CountShape(int shape, int delta) {
  for (auto& [s, n] : shape_counts_) {
    if (s == shape) {
      n += delta;
      return;
    }
  }
  shape_counts_.emplace_back(shape, delta);
}

NodeLedger::NodeLedger(const NodeSpec* spec, const GpuCatalog& catalog) : spec_(spec) {
  gpus_.reserve(spec->gpus.size());
  for (const GpuSpec& g : spec->gpus) {
    gpus_.emplace_back(&catalog.Get(g.model), g.mode, g.replicas);
  }
  free_gpu_milli_ = static_cast<int64_t>(gpus_.size()) * kMilliPerGpu;
  ApplyLabels();
}

void NodeLedger::ApplyLabels() {
  const bool one_user = MpsServesOneUser(*spec_);
  for (GpuLedger& g : gpus_) {
    g.SetOneUser(one_user && g.mode() == SharingMode::kShared);
  }
}

void NodeLedger::RebindSpec(const NodeSpec* spec) {
  spec_ = spec;
  ApplyLabels();
  ++version_;
}

Status NodeLedger::CheckGrantsDistinct(const Allocation& a) const {
  uint64_t seen = 0;
  for (const GpuGrant& g : a.gpus) {
    if (g.gpu < 0 || g.gpu >= gpu_count()) {
      return InvalidArgumentError("node '" + spec_->name + "' has no GPU " + std::to_string(g.gpu));
    }
    uint64_t bit = uint64_t{1} << g.gpu;
    if ((seen & bit) != 0) {
      return InvalidArgumentError("allocation names GPU " + std::to_string(g.gpu) + " twice");
    }
    seen |= bit;
  }
  return Status::Ok();
}

Status NodeLedger::Allocate(const Allocation& a) {
  TESSERA_RETURN_IF_ERROR(CheckGrantsDistinct(a));
  if (a.cpu.value() < 0 || a.memory.value() < 0) {
    return InvalidArgumentError("negative CPU or memory in allocation");
  }
  if (a.cpu > free_cpu()) {
    return ResourceExhaustedError("node '" + spec_->name + "' has " + ToString(free_cpu()) +
                                  " free; allocation asks for " + ToString(a.cpu));
  }
  if (a.memory > free_memory()) {
    return ResourceExhaustedError("node '" + spec_->name + "' has " + ToString(free_memory()) +
                                  " free; allocation asks for " + ToString(a.memory));
  }
  // Apply GPU grants one by one and roll back on the first failure.
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    Status s = gpus_[a.gpus[i].gpu].Allocate(a.gpus[i], a.identity);
    if (!s.ok()) {
      for (size_t j = i; j-- > 0;) {
        Status undo = gpus_[a.gpus[j].gpu].Release(a.gpus[j], a.identity);
        (void)undo;  // cannot fail: it undoes a grant made just above
      }
      return s;
    }
  }
  used_cpu_ += a.cpu;
  used_memory_ += a.memory;
  free_gpu_milli_ -= a.TotalGpuMilli().value();
  CountShape(a.Shape(), +1);
  ++version_;
  return Status::Ok();
}

Status NodeLedger::Release(const Allocation& a) {
  TESSERA_RETURN_IF_ERROR(CheckGrantsDistinct(a));
  if (a.cpu > used_cpu_ || a.memory > used_memory_ || a.cpu.value() < 0 || a.memory.value() < 0) {
    return FailedPreconditionError("release on node '" + spec_->name +
                                   "' exceeds what is allocated");
  }
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    Status s = gpus_[a.gpus[i].gpu].Release(a.gpus[i], a.identity);
    if (!s.ok()) {
      for (size_t j = i; j-- > 0;) {
        Status redo = gpus_[a.gpus[j].gpu].Allocate(a.gpus[j], a.identity);
        (void)redo;  // cannot fail: it restores a grant released just above
      }
      return s;
    }
  }
  used_cpu_ -= a.cpu;
  used_memory_ -= a.memory;
  free_gpu_milli_ += a.TotalGpuMilli().value();
  CountShape(a.Shape(), -1);
  ++version_;
  return Status::Ok();
}

namespace {
bool ShapesEqual(const std::vector<std::pair<int, int>>& a,
                 const std::vector<std::pair<int, int>>& b) {
  auto live = [](const std::vector<std::pair<int, int>>& v) {
    std::vector<std::pair<int, int>> out;
    for (const auto& e : v) {
      if (e.second != 0) {
        out.push_back(e);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  return live(a) == live(b);
}
}  // namespace

void NodeLedger::SetDrained(bool drained) {
  drained_ = drained;
  ++version_;
}

Status NodeLedger::SetGpuDrained(int gpu, bool drained) {
  if (gpu < 0 || gpu >= gpu_count()) {
    return InvalidArgumentError("node " + spec_->name + " has no GPU " + std::to_string(gpu));
  }
  gpus_[static_cast<size_t>(gpu)].SetDrained(drained);
  ++version_;
  return Status::Ok();
}

bool NodeLedger::SameUsage(const NodeLedger& other) const {
  return spec_ == other.spec_ && drained_ == other.drained_ && used_cpu_ == other.used_cpu_ &&
         used_memory_ == other.used_memory_ && free_gpu_milli_ == other.free_gpu_milli_ &&
         gpus_ == other.gpus_ && ShapesEqual(shape_counts_, other.shape_counts_);
}

}  // namespace tessera
