// GpuLedger: what is allocated on one physical GPU, for its sharing mode.
//
//   exclusive  one grant of the whole card (1000 milli) at a time
//   shared     any number of software shares while milli <= 1000 and memory <= the card's
//   mig        MIG instances laid out by MigLayout; each charges its compute share
//
// Invariants: 0 <= used_milli <= 1000; 0 <= used_memory <= memory (when the model's
// memory is known); Allocate is all-or-nothing and Release undoes it exactly, so a
// ledger that released every grant equals a fresh one. Thread safety: none; the
// owner (ClusterState) serialises access.
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
  GpuLedger(const GpuModel* model, SharingMode mode);

  const GpuModel& model() const { return *model_; }
  SharingMode mode() const { return mode_; }
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

  // Whether a software share or a whole card of `milli` and `memory` fits now.
  bool FitsShare(MilliGpu milli, MiB memory) const;
  // Whether the whole card is free for an exclusive grant.
  bool FitsWhole() const { return grants_ == 0 && mode_ != SharingMode::kMig; }

  Status Allocate(const GpuGrant& grant);
  Status Release(const GpuGrant& grant);

  bool operator==(const GpuLedger& other) const;

 private:
  const GpuModel* model_;
  SharingMode mode_;
  int32_t used_milli_ = 0;
  int64_t used_memory_ = 0;
  int32_t grants_ = 0;
  bool drained_ = false;
  MigLayout mig_;
};

}  // namespace tessera
