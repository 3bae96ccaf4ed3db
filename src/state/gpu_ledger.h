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
// Invariants: 0 <= used_milli <= 1000; 0 <= used_memory <= memory (when the model's
// memory is known); 0 <= used_replicas <= replicas; Allocate is all-or-nothing and
// Release undoes it exactly, so a ledger that released every grant equals a fresh one.
// Thread safety: none; the owner (ClusterState) serialises access.
#pragma once

#include <cstdint>

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

  Status Allocate(const GpuGrant& grant);
  Status Release(const GpuGrant& grant);

  bool operator==(const GpuLedger& other) const;

 private:
  // Whether a grant booked exactly as given fits now.
  bool FitsGrant(MilliGpu milli, MiB memory) const;

  const GpuModel* model_;
  SharingMode mode_;
  int32_t replicas_ = 0;
  int32_t used_replicas_ = 0;
  int32_t used_milli_ = 0;
  int64_t used_memory_ = 0;
  int32_t grants_ = 0;
  bool drained_ = false;
  MigLayout mig_;
};

}  // namespace tessera
