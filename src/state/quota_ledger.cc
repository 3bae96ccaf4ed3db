#include "state/quota_ledger.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace tessera {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Quotas may be as large as int64 allows (a config can say "no limit" with a huge
// number), so sums that involve them saturate instead of wrapping.
int64_t SatAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    return b > 0 ? kMax : kMin;
  }
  return out;
}

int64_t SatSub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) {
    return b < 0 ? kMax : kMin;
  }
  return out;
}

std::string Describe(const QueueTree& tree, QueueId id) {
  return std::string(tree.is_queue(id) ? "queue '" : "cohort '") + tree.spec(id).name + "'";
}

}  // namespace

QuotaLedger::QuotaLedger(const QueueTree& tree)
    : tree_(&tree),
      resources_(tree.resources().size()),
      subtree_(tree.size() * resources_, 0),
      guaranteed_(tree.size() * resources_, 0),
      usage_(tree.size() * resources_, 0) {
  for (QueueId id : tree.bottom_up()) {
    for (size_t r = 0; r < resources_; ++r) {
      int64_t subtree = tree.quota(id, r).nominal;
      for (QueueId child : tree.children(id)) {
        // lendable(c) = subtree(c) - guaranteed(c)
        subtree = SatAdd(subtree, SatSub(subtree_[Index(child, r)], guaranteed_[Index(child, r)]));
      }
      const std::optional<int64_t>& lending_limit = tree.quota(id, r).lending_limit;
      int64_t lendable = lending_limit ? std::min(subtree, *lending_limit) : subtree;
      subtree_[Index(id, r)] = subtree;
      guaranteed_[Index(id, r)] = SatSub(subtree, lendable);
    }
  }
}

int64_t QuotaLedger::SubtreeQuota(QueueId id, size_t r) const { return subtree_[Index(id, r)]; }

int64_t QuotaLedger::Guaranteed(QueueId id, size_t r) const { return guaranteed_[Index(id, r)]; }

int64_t QuotaLedger::Usage(QueueId id, size_t r) const { return usage_[Index(id, r)]; }

int64_t QuotaLedger::Available(QueueId id, size_t r) const {
  const int64_t subtree = subtree_[Index(id, r)];
  const int64_t usage = usage_[Index(id, r)];
  QueueId parent = tree_->parent(id);
  if (!parent.valid()) {
    return SatSub(subtree, usage);
  }
  const int64_t guaranteed = guaranteed_[Index(id, r)];
  const int64_t local = std::max<int64_t>(0, SatSub(guaranteed, usage));
  int64_t from_parent = Available(parent, r);
  if (const std::optional<int64_t>& limit = tree_->quota(id, r).borrowing_limit) {
    const int64_t stored_in_parent = SatSub(subtree, guaranteed);
    const int64_t used_in_parent = std::max<int64_t>(0, SatSub(usage, guaranteed));
    const int64_t room = SatAdd(SatSub(stored_in_parent, used_in_parent), *limit);
    from_parent = std::min(from_parent, room);
  }
  return SatAdd(local, from_parent);
}

QuotaFit QuotaLedger::Check(QueueId queue, const ResourceVector& charge,
                            bool allow_borrowing) const {
  assert(charge.size() == resources_);
  const size_t n = std::min(charge.size(), resources_);
  bool within_nominal = true;
  for (size_t r = 0; r < n; ++r) {
    if (charge[r] == 0) {
      continue;
    }
    // Within its own nominal quota or not, the charge must fit what the queue can
    // take now: quota it lends may be in use by a sibling (Kueue reclaims it by
    // preemption, which is not the ledger's business).
    if (charge[r] > Available(queue, r)) {
      return QuotaFit::kNo;
    }
    if (SatAdd(usage_[Index(queue, r)], charge[r]) > tree_->quota(queue, r).nominal) {
      within_nominal = false;
    }
  }
  if (within_nominal) {
    return QuotaFit::kNominal;
  }
  return allow_borrowing ? QuotaFit::kBorrow : QuotaFit::kNo;
}

void QuotaLedger::Add(QueueId queue, const ResourceVector& charge) {
  assert(charge.size() == resources_);
  const size_t n = std::min(charge.size(), resources_);
  for (size_t r = 0; r < n; ++r) {
    if (charge[r] == 0) {
      continue;
    }
    int64_t& usage = usage_[Index(queue, r)];
    const int64_t old_usage = usage;
    usage = SatAdd(usage, charge[r]);
    Propagate(queue, r, old_usage);
  }
}

void QuotaLedger::Remove(QueueId queue, const ResourceVector& charge) {
  assert(charge.size() == resources_);
  const size_t n = std::min(charge.size(), resources_);
  for (size_t r = 0; r < n; ++r) {
    if (charge[r] == 0) {
      continue;
    }
    int64_t& usage = usage_[Index(queue, r)];
    const int64_t old_usage = usage;
    usage = SatSub(usage, charge[r]);
    Propagate(queue, r, old_usage);
  }
}

// usage(parent) holds max(0, usage(child) - guaranteed(child)) for each child; after
// usage(node) changed from old_usage, moves the difference up the chain, stopping
// where it is absorbed by a guaranteed part.
void QuotaLedger::Propagate(QueueId queue, size_t r, int64_t old_usage) {
  QueueId node = queue;
  int64_t old = old_usage;
  for (QueueId parent = tree_->parent(node); parent.valid(); parent = tree_->parent(node)) {
    const int64_t guaranteed = guaranteed_[Index(node, r)];
    const int64_t before = std::max<int64_t>(0, SatSub(old, guaranteed));
    const int64_t after = std::max<int64_t>(0, SatSub(usage_[Index(node, r)], guaranteed));
    if (before == after) {
      return;
    }
    int64_t& parent_usage = usage_[Index(parent, r)];
    old = parent_usage;
    parent_usage = SatAdd(parent_usage, SatSub(after, before));
    node = parent;
  }
}

bool QuotaLedger::IsBorrowing(QueueId id, const ResourceVector& mask) const {
  for (size_t r = 0; r < resources_; ++r) {
    if (!mask.empty() && (r >= mask.size() || mask[r] == 0)) {
      continue;
    }
    if (usage_[Index(id, r)] > subtree_[Index(id, r)]) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> QuotaLedger::Violations() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < tree_->size(); ++i) {
    const QueueId id(static_cast<uint32_t>(i));
    for (size_t r = 0; r < resources_; ++r) {
      const std::string where = Describe(*tree_, id) + " on " +
                                ResourceNameString(tree_->resources()[r], tree_->catalog());
      const int64_t usage = usage_[Index(id, r)];
      const int64_t subtree = subtree_[Index(id, r)];
      if (usage < 0) {
        out.push_back(where + ": usage " + std::to_string(usage) + " is negative");
      }
      if (!tree_->parent(id).valid()) {
        if (usage > subtree) {
          out.push_back(where + ": usage " + std::to_string(usage) + " exceeds its quota " +
                        std::to_string(subtree));
        }
      } else if (const std::optional<int64_t>& limit = tree_->quota(id, r).borrowing_limit) {
        if (usage > SatAdd(subtree, *limit)) {
          out.push_back(where + ": usage " + std::to_string(usage) + " exceeds its quota " +
                        std::to_string(subtree) + " plus its borrowing limit " +
                        std::to_string(*limit));
        }
      }
      if (!tree_->is_queue(id)) {
        int64_t from_children = 0;
        for (QueueId child : tree_->children(id)) {
          from_children = SatAdd(
              from_children,
              std::max<int64_t>(0, SatSub(usage_[Index(child, r)], guaranteed_[Index(child, r)])));
        }
        if (usage != from_children) {
          out.push_back(where + ": usage " + std::to_string(usage) +
                        " differs from what its children use beyond their guaranteed quota, " +
                        std::to_string(from_children));
        }
      }
    }
  }
  return out;
}

}  // namespace tessera
