#include "state/mig_layout.h"

#include <algorithm>
#include <numeric>

namespace tessera {

uint8_t MigLayout::SlotMask(int start, int length) {
  return static_cast<uint8_t>(((1U << length) - 1U) << start);
}

int MigLayout::CountOfProfile(int profile) const {
  return static_cast<int>(
      std::count_if(instances_.begin(), instances_.end(),
                    [&](const MigInstance& i) { return i.profile == profile; }));
}

bool MigLayout::CanAdd(int profile, int start) const {
  if (profile < 0 || profile >= static_cast<int>(model_->mig_profiles.size())) {
    return false;
  }
  const MigProfile& p = model_->mig_profiles[profile];
  if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) {
    return false;
  }
  if ((used_slots_ & SlotMask(start, p.memory_slots)) != 0) {
    return false;
  }
  if (used_compute_ + p.compute_slices > kMigComputeSlices) {
    return false;
  }
  return CountOfProfile(profile) < p.max_instances;
}

std::vector<int> MigLayout::LegalStarts(int profile) const {
  std::vector<int> out;
  if (profile < 0 || profile >= static_cast<int>(model_->mig_profiles.size())) {
    return out;
  }
  for (int s : model_->mig_profiles[profile].starts) {
    if (CanAdd(profile, s)) {
      out.push_back(s);
    }
  }
  return out;
}

Status MigLayout::Add(const MigInstance& instance) {
  if (!CanAdd(instance.profile, instance.start)) {
    std::string name = "#";
    if (instance.profile >= 0 && instance.profile < static_cast<int>(model_->mig_profiles.size())) {
      name = model_->mig_profiles[instance.profile].name;
    } else {
      name.append(std::to_string(instance.profile));
    }
    return FailedPreconditionError("MIG instance " + name + " cannot start at slot " +
                                   std::to_string(instance.start) + " on " + model_->name +
                                   " with the current layout");
  }
  const MigProfile& p = model_->mig_profiles[instance.profile];
  used_slots_ |= SlotMask(instance.start, p.memory_slots);
  used_compute_ += p.compute_slices;
  instances_.push_back(instance);
  return Status::Ok();
}

Status MigLayout::Remove(const MigInstance& instance) {
  auto it = std::find(instances_.begin(), instances_.end(), instance);
  if (it == instances_.end()) {
    return NotFoundError("no MIG instance with profile #" + std::to_string(instance.profile) +
                         " at slot " + std::to_string(instance.start));
  }
  const MigProfile& p = model_->mig_profiles[instance.profile];
  used_slots_ &= static_cast<uint8_t>(~SlotMask(instance.start, p.memory_slots));
  used_compute_ -= p.compute_slices;
  instances_.erase(it);
  return Status::Ok();
}

std::vector<int> MigLayout::Headroom() const {
  std::vector<int> room(model_->mig_profiles.size(), 0);
  for (size_t p = 0; p < room.size(); ++p) {
    MigLayout probe = *this;
    int added = 0;
    while (true) {
      std::vector<int> starts = probe.LegalStarts(static_cast<int>(p));
      if (starts.empty()) {
        break;
      }
      // Smallest-profile runs are packed from the top so that the greedy count is
      // the true maximum for the nested placement tables NVIDIA uses.
      if (!probe.Add({static_cast<int>(p), starts.back()}).ok()) {
        break;
      }
      ++added;
    }
    room[p] = added;
  }
  return room;
}

std::optional<int> MigLayout::ChooseStart(int profile) const {
  std::vector<int> starts = LegalStarts(profile);
  if (starts.empty()) {
    return std::nullopt;
  }
  // Profiles ordered largest first (by slot run, then compute) for the comparison.
  std::vector<int> order(model_->mig_profiles.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const MigProfile& pa = model_->mig_profiles[a];
    const MigProfile& pb = model_->mig_profiles[b];
    if (pa.memory_slots != pb.memory_slots) {
      return pa.memory_slots > pb.memory_slots;
    }
    return pa.compute_slices > pb.compute_slices;
  });
  std::optional<int> best;
  std::vector<int> best_key;
  for (int s : starts) {
    MigLayout after = *this;
    if (!after.Add({profile, s}).ok()) {
      continue;
    }
    std::vector<int> room = after.Headroom();
    std::vector<int> key;
    key.reserve(order.size());
    for (int p : order) {
      key.push_back(room[p]);
    }
    // >= so that among equals the higher slot wins.
    if (!best || key >= best_key) {
      best = s;
      best_key = std::move(key);
    }
  }
  return best;
}

}  // namespace tessera
