#include "sched/job_order.h"

#include <algorithm>
#include <cmath>

namespace tessera {

QueueUsage::QueueUsage(const QueueTree& tree, int64_t capacity_gpu_milli,
                       int64_t capacity_cpu_milli, int64_t capacity_memory_mib, Micros half_life)
    : tree_(&tree),
      cap_gpu_(std::max<int64_t>(capacity_gpu_milli, 1)),
      cap_cpu_(std::max<int64_t>(capacity_cpu_milli, 1)),
      cap_mem_(std::max<int64_t>(capacity_memory_mib, 1)),
      half_life_s_(std::max(1.0, static_cast<double>(half_life) / 1e6)),
      alloc_(tree.size()),
      decayed_(tree.size(), 0.0) {
  for (QueueId q : tree.queues()) {
    weight_total_ += static_cast<double>(tree.spec(q).weight);
  }
}

void QueueUsage::SetCapacity(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib) {
  cap_gpu_ = std::max<int64_t>(gpu_milli, 1);
  cap_cpu_ = std::max<int64_t>(cpu_milli, 1);
  cap_mem_ = std::max<int64_t>(memory_mib, 1);
}

void QueueUsage::Advance(Micros now) {
  if (now <= now_) {
    return;
  }
  const double dt = static_cast<double>(now - now_) / 1e6;
  now_ = now;
  // Usage u(t) at constant allocation a decays as u' = a - k u with k = ln2 / half-life:
  // u(t + dt) = u e^{-k dt} + a (1 - e^{-k dt}) / k.
  const double k = std::log(2.0) / half_life_s_;
  const double f = std::exp(-k * dt);
  const double gain = (1.0 - f) / k;
  decayed_total_ = 0;
  for (QueueId q : tree_->queues()) {
    double& u = decayed_[q.value()];
    u = u * f + static_cast<double>(alloc_[q.value()].gpu_milli) * gain;
    decayed_total_ += u;
  }
  for (User& user : users_) {
    user.decayed = user.decayed * f + static_cast<double>(user.gpu_milli) * gain;
  }
}

size_t QueueUsage::UserSlot(QueueId q, const std::string& user) {
  auto [it, added] = user_slot_.try_emplace({q.value(), user}, users_.size());
  if (added) {
    users_.push_back(User{q, user, 0, 0.0});
  }
  return it->second;
}

void QueueUsage::AddUser(size_t slot, const std::vector<Allocation>& allocations) {
  for (const Allocation& x : allocations) {
    users_[slot].gpu_milli += x.TotalGpuMilli().value();
  }
}

void QueueUsage::RemoveUser(size_t slot, const std::vector<Allocation>& allocations) {
  for (const Allocation& x : allocations) {
    users_[slot].gpu_milli -= x.TotalGpuMilli().value();
  }
}

void QueueUsage::Add(QueueId queue, const std::vector<Allocation>& allocations) {
  Alloc& a = alloc_[queue.value()];
  for (const Allocation& x : allocations) {
    a.gpu_milli += x.TotalGpuMilli().value();
    a.cpu_milli += x.cpu.value();
    a.memory_mib += x.memory.value();
  }
}

void QueueUsage::Remove(QueueId queue, const std::vector<Allocation>& allocations) {
  Alloc& a = alloc_[queue.value()];
  for (const Allocation& x : allocations) {
    a.gpu_milli -= x.TotalGpuMilli().value();
    a.cpu_milli -= x.cpu.value();
    a.memory_mib -= x.memory.value();
  }
}

QueueUsage::Saved QueueUsage::Save() const {
  Saved saved;
  saved.at = now_;
  for (QueueId q : tree_->queues()) {
    saved.decayed.emplace_back(tree_->spec(q).name, decayed_[q.value()]);
  }
  for (const User& user : users_) {
    saved.users.push_back({tree_->spec(user.queue).name, user.name, user.decayed});
  }
  return saved;
}

void QueueUsage::Restore(const Saved& saved) {
  now_ = saved.at;
  decayed_total_ = 0;
  std::fill(decayed_.begin(), decayed_.end(), 0.0);
  for (const auto& [name, usage] : saved.decayed) {
    StatusOr<QueueId> q = tree_->Find(name);
    if (q.ok() && tree_->is_queue(q.value()) && usage >= 0) {
      decayed_[q.value().value()] = usage;
      decayed_total_ += usage;
    }
  }
  for (User& user : users_) {
    user.decayed = 0;
  }
  for (const SavedUser& saved_user : saved.users) {
    StatusOr<QueueId> q = tree_->Find(saved_user.queue);
    if (q.ok() && tree_->is_queue(q.value()) && saved_user.decayed >= 0) {
      users_[UserSlot(q.value(), saved_user.user)].decayed = saved_user.decayed;
    }
  }
}

double QueueUsage::FairShareFactor(QueueId q) const {
  const double share = weight_total_ > 0
                           ? static_cast<double>(tree_->spec(q).weight) / weight_total_
                           : 1.0;
  const double used = decayed_total_ > 0 ? decayed_[q.value()] / decayed_total_ : 0.0;
  return std::exp2(-used / share);
}

double QueueUsage::DominantShare(QueueId q) const {
  const Alloc& a = alloc_[q.value()];
  const double dominant = std::max({static_cast<double>(a.gpu_milli) / static_cast<double>(cap_gpu_),
                                    static_cast<double>(a.cpu_milli) / static_cast<double>(cap_cpu_),
                                    static_cast<double>(a.memory_mib) / static_cast<double>(cap_mem_)});
  return dominant / static_cast<double>(tree_->spec(q).weight);
}

}  // namespace tessera
