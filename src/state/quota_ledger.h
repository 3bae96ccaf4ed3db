// QuotaLedger: quota usage per queue and cohort, with Kueue's admission arithmetic.
//
// For every node n of the QueueTree and resource r (all integers):
//   subtree(n)    = nominal(n) + sum over children c of lendable(c)
//   lendable(c)   = min(subtree(c), lending_limit(c))    (subtree(c) when unset)
//   guaranteed(n) = subtree(n) - lendable(n)              (what n never lends)
//   usage(queue)  = the sum of its admitted jobs' charges
//   usage(cohort) = sum over children c of max(0, usage(c) - guaranteed(c))
// A root may use up to subtree(root). A node with a parent may use its guaranteed
// part locally plus what its parent can still give, capped by its borrowing limit:
//   available(n) = max(0, guaranteed(n) - usage(n))
//                + min(available(parent), borrowing_room(n))
//   borrowing_room(n) = subtree(n) - guaranteed(n) - max(0, usage(n) - guaranteed(n))
//                       + borrowing_limit(n)                (infinite when unset)
// which is Kueue's resource_node.go. The invariant, checked by Violations(), is
// stated without `available`: every root within subtree(root), and every other node
// within subtree(n) + borrowing_limit(n).
//
// Thread safety: none; one driver thread owns it. Copyable (what-if forks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/queue_tree.h"

namespace tessera {

// One value per QueueTree::resources() entry.
using ResourceVector = std::vector<int64_t>;

enum class QuotaFit : uint8_t {
  kNominal,  // fits the queue's own nominal quota (no borrowing)
  kBorrow,   // fits only by borrowing from the cohort
  kNo,       // does not fit now
};

class QuotaLedger {
 public:
  explicit QuotaLedger(const QueueTree& tree);

  const QueueTree& tree() const { return *tree_; }

  int64_t SubtreeQuota(QueueId id, size_t r) const;
  int64_t Guaranteed(QueueId id, size_t r) const;
  int64_t Usage(QueueId id, size_t r) const;
  int64_t Available(QueueId id, size_t r) const;

  // Whether `charge` more fits `queue` now: kNo unless charge <= Available(queue) on
  // every resource it charges (even within nominal quota: what a queue lends may be in
  // use by a sibling); then kNominal when usage + charge <= nominal(queue) on each,
  // else kBorrow. With allow_borrowing false, kBorrow becomes kNo.
  QuotaFit Check(QueueId queue, const ResourceVector& charge, bool allow_borrowing = true) const;

  // Charges and refunds a queue (cohort usage follows). Remove must match an Add.
  void Add(QueueId queue, const ResourceVector& charge);
  void Remove(QueueId queue, const ResourceVector& charge);

  // Whether the node uses more than its own quota (SubtreeQuota: the nominal quota of
  // a queue) on any resource in `mask` (resources where mask[r] != 0; all when empty).
  bool IsBorrowing(QueueId id, const ResourceVector& mask = {}) const;

  // Human-readable descriptions of every broken invariant; empty when all hold.
  std::vector<std::string> Violations() const;

 private:
  size_t Index(QueueId id, size_t r) const { return id.value() * resources_ + r; }
  void Propagate(QueueId queue, size_t r, int64_t old_usage);

  const QueueTree* tree_;
  size_t resources_;
  std::vector<int64_t> subtree_;     // node-major
  std::vector<int64_t> guaranteed_;  // node-major
  std::vector<int64_t> usage_;       // node-major
};

}  // namespace tessera
