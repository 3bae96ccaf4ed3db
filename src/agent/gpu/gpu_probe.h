// `tessera gpu-probe`: what the agent would see on this machine, checked before the
// node joins a cluster or after a driver update. It discovers the GPUs through a
// backend (NVML on real machines), takes telemetry samples, and, on GPUs that are
// already in MIG mode, creates and destroys one MIG instance of the smallest profile
// to prove the agent can slice them. It never changes a GPU's mode, clocks or
// settings: a GPU not in MIG mode is left alone and said so. A MIG check that finds
// no free slot (instances made by someone else) reports it and touches nothing.
// Thread safety: uses the backend from the calling thread only.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

struct GpuProbeOptions {
  int samples = 3;                                      // telemetry samples, >= 1
  std::chrono::milliseconds interval{1000};             // between samples
  bool mig_check = false;                               // create/destroy on MIG-mode GPUs
  std::vector<int> mig_gpus;                            // empty: every GPU in MIG mode
  std::function<void(std::chrono::milliseconds)> sleep;  // null: std::this_thread
};

// The probe's report:
//   {"backend": "...", "gpus": [inventory entries], "samples": [[telemetry per GPU]],
//    "mig_check": [{"gpu", "profile", "start", "uuid", "created", "visible",
//                   "destroyed", "gone", "create_ms", "destroy_ms", "skipped"|"error"}],
//    "ok": bool}
// "ok" is false when discovery found no usable GPU data, a sample failed, or a MIG
// check that ran did not create, see, destroy and then miss its instance. Errors of
// the backend itself (no driver) are returned as the Status.
StatusOr<nlohmann::json> RunGpuProbe(GpuBackend& backend, const GpuCatalog& catalog,
                                     const GpuProbeOptions& options);

}  // namespace tessera
