// MigLayout: the MIG instances present on one GPU, and the geometry rules that say
// which new instance may join them.
//
// Invariants (checked by Add): instance slot runs do not overlap, each starts at a
// legal slot of its profile, compute slices add up to at most 7, and no profile
// exceeds its max_instances. Remove undoes Add exactly. Thread safety: value type,
// no internal locking.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

struct MigInstance {
  int profile = -1;  // index into GpuModel::mig_profiles
  int start = -1;    // first memory slot
  bool operator==(const MigInstance&) const = default;
};

class MigLayout {
 public:
  explicit MigLayout(const GpuModel* model) : model_(model) {}

  const GpuModel& model() const { return *model_; }
  const std::vector<MigInstance>& instances() const { return instances_; }
  uint8_t used_slots() const { return used_slots_; }
  int used_compute() const { return used_compute_; }
  bool empty() const { return instances_.empty(); }

  // Whether an instance of `profile` may start at `start` next to the current ones.
  bool CanAdd(int profile, int start) const;
  // All legal start slots for `profile` now, ascending.
  std::vector<int> LegalStarts(int profile) const;
  Status Add(const MigInstance& instance);
  Status Remove(const MigInstance& instance);

  // The start slot for a new `profile` instance that keeps the largest profiles
  // placeable: among legal starts, the one after which the count of placeable
  // instances is lexicographically greatest, largest profiles first (ties: the
  // higher slot, which keeps slot 0, where 4g and 7g must start, free).
  // nullopt when the profile fits nowhere.
  std::optional<int> ChooseStart(int profile) const;

  // For each profile of the model, how many more instances of it alone could be
  // added to the current layout (a greedy packing into the free legal slots).
  std::vector<int> Headroom() const;

 private:
  int CountOfProfile(int profile) const;
  static uint8_t SlotMask(int start, int length);

  const GpuModel* model_;
  std::vector<MigInstance> instances_;
  uint8_t used_slots_ = 0;
  int used_compute_ = 0;
};

}  // namespace tessera
