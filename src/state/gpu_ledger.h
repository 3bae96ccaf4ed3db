// GpuLedger: what is allocated on one physical GPU, for its sharing mode.
//
//   exclusive  one grant of the whole card (1000 milli) at a time
//   shared     any number of software shares while milli <= 1000 and memory <= the card's;
//              a share without a memory request books its compute fraction of the
//              card's memory (milli * memory / 1000), so shares never overbook memory
//   timeslice  N replicas (2..64); a share takes ceil(milli * N / 1000) of them and books
//              that many replicas' milli (k * 1000 / N, rounded down); memory is not
//              isolated, so none is booked (a request must only fit the card); never a
//              whole card
//   mig        MIG instances laid out by MigLayout; each charges its compute share
//
// One user per MPS server: a shared GPU served by single-user MPS (one_user(), set by
// NodeLedger from its node's labels, model/node.h MpsServesOneUser) takes shares of one
// identity (TaskRequest::identity: who the task runs as) at a time, since a client of
// another uid would wait for the running server's clients to end. The ledger counts the
// live grants of each non-zero identity on a shared GPU; AdmitsIdentity says whether a
// share of an identity may join now ("not now" otherwise: the card is not too small).
// Like a drain, the rule is the scheduler's (GpuFitsRequest): Allocate still accepts
// any identity, so work already running (re-adopted after a restart) is never refused.
//
// Invariants: 0 <= used_milli <= 1000; 0 <= used_memory <= memory (when the model's
// memory is known); 0 <= used_replicas <= replicas; Allocate is all-or-nothing and
// Release undoes it exactly, so a ledger that released every grant equals a fresh one.
// Thread safety: none; the owner (ClusterState) serialises access.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/quantity.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"
#include "state/mig_layout.h"

namespace tessera {

// One GPU's part of a task's allocation.
struct GpuGrant {
  int gpu = -1;          // index of the GPU in its node
  MilliGpu milli{0};     // compute share charged (1000 for a whole card)
  MiB memory{0};         // GPU memory charged
  int mig_profile = -1;  // MIG only: profile index in the model's table
  int mig_start = -1;    // MIG only: first memory slot of the instance

  bool is_mig() const { return mig_profile >= 0; }
  bool operator==(const GpuGrant&) const = default;
};

class GpuLedger {
 public:
  // `replicas`: timeslice only (2..64; ValidateNodeSpec checks it).
  GpuLedger(const GpuModel* model, SharingMode mode, int replicas = 0);

  const GpuModel& model() const { return *model_; }
  SharingMode mode() const { return mode_; }
  int replicas() const { return replicas_; }
  int used_replicas() const { return used_replicas_; }
  MilliGpu used_milli() const { return MilliGpu(used_milli_); }
  MilliGpu free_milli() const { return MilliGpu(kMilliPerGpu - used_milli_); }
  MiB used_memory() const { return MiB(used_memory_); }
  // Free GPU memory; for a model of undisclosed memory, 0.
  MiB free_memory() const { return MiB(model_->memory.value() - used_memory_); }
  int grant_count() const { return grants_; }
  bool idle() const { return grants_ == 0; }
  // A drained GPU takes no new grants from the scheduler (GpuFitsRequest says no);
  // grants it holds stay, and Allocate still accepts grants of work already running
  // there (re-adopted after a restart).
  bool drained() const { return drained_; }
  void SetDrained(bool drained) { drained_ = drained; }
  const MigLayout& mig() const { return mig_; }
  // Single-user MPS serves this GPU's shares (see the top of this file).
  bool one_user() const { return one_user_; }
  void SetOneUser(bool one_user) { one_user_ = one_user; }
  // Whether a share of `identity` may join the shares here now: true unless one_user()
  // and a share of another non-zero identity is on the card (0 is unknown: admitted).
  bool AdmitsIdentity(uint64_t identity) const;
  // Live grants per identity (shared GPUs, non-zero identities), sorted by identity.
  const std::vector<std::pair<uint64_t, int32_t>>& identities() const { return identities_; }

  // Whether a software share or a whole card asking `milli` and `memory` (0: no
  // memory request) fits now, booked as BookedMilli and BookedMemory say.
  bool FitsShare(MilliGpu milli, MiB memory) const;
  // Whether the whole card is free for an exclusive grant (never on MIG or timeslice).
  bool FitsWhole() const {
    return grants_ == 0 && mode_ != SharingMode::kMig && mode_ != SharingMode::kTimeslice;
  }
  // What a share asking `milli` books here: on timeslice, its replicas' worth; else milli.
  MilliGpu BookedMilli(MilliGpu milli) const;
  // What a share asking `milli` and `memory` books here: on shared, the memory asked or
  // else the compute fraction of the card's; on timeslice nothing; else the memory asked.
  MiB BookedMemory(MilliGpu milli, MiB memory) const;
  // Timeslice replicas a share of `milli` takes: ceil(milli * replicas / 1000).
  int ReplicasFor(MilliGpu milli) const;

  // `identity`: who the grant's task runs as (0: unknown), counted on shared GPUs.
  Status Allocate(const GpuGrant& grant, uint64_t identity = 0);
  Status Release(const GpuGrant& grant, uint64_t identity = 0);

  bool operator==(const GpuLedger& other) const;

 private:
  // Whether a grant booked exactly as given fits now.
  bool FitsGrant(MilliGpu milli, MiB memory) const;
  void CountIdentity(uint64_t identity, int delta);

  const GpuModel* model_;
  SharingMode mode_;
  int32_t replicas_ = 0;
  int32_t used_replicas_ = 0;
  int32_t used_milli_ = 0;
  int64_t used_memory_ = 0;
  int32_t grants_ = 0;
  bool drained_ = false;
  bool one_user_ = false;
  std::vector<std::pair<uint64_t, int32_t>> identities_;  // (identity, live grants) > 0
  MigLayout mig_;
};

}  // namespace tessera
