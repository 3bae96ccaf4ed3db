// A fake GPU inventory built from a spec string, for tests, demos and machines
// without GPUs. It behaves like the NVML backend: MIG instances obey the catalog's
// placement rules, created instances appear in Discover(), and errors carry the same
// codes (see gpu_backend.h).
//
// Spec grammar: comma-separated items. A group item is "[N x] G x MODEL[:MODE]": N
// groups (default 1) of G GPUs of catalog model MODEL, MODE one of exclusive|mig|shared|
// timeslice=R (R replicas, 2..64; default exclusive). Each group is one NVLink domain and
// one NUMA node, numbered in order from 0 (a group of one GPU has no NVLink peer: domain
// -1). A bare item "mig", "shared", "exclusive" or "timeslice=R" sets the mode of every
// group without an explicit one. "" or "none" is a machine without GPUs. At most 64 GPUs.
//   "8xH100-80GB"                         8 GPUs, one domain, NUMA node 0
//   "2x4xA100-80GB,mig"                   8 GPUs in two NVLink/NUMA groups of 4, MIG mode
//   "2x8xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared"
//   "1xA100-80GB:timeslice=4"             one GPU taken in turn by up to 4 shares
// Invalid specs give InvalidArgument naming the bad item.
//
// UUIDs are stable per (node name, GPU index): the UUID form of
// "GPU-fake-<node>-<index>"; MIG instance UUIDs are stable per (node, GPU, creation
// order). The fake reports no CPU affinity (cpus is empty). GPU i's device minor is i;
// a MIG instance's GPU instance id is the smallest free one from 1 (as NVML assigns)
// and its compute instance id 0.
//
// Telemetry is made up from the catalog and from what the agent runs (SetTaskLoad),
// deterministically. A card's busy share is the sum of the milli of its loads (MIG: the
// compute share of its busy instances), at most 1000. Idle: 0 % utilisation, no memory
// used, 30 + index % 4 degrees, 15 % of the model's board power, SM clock 210 MHz.
// Busy: utilisation jitter * share / 1000 where jitter is in 60..100 (a hash of the
// seed, node, index and sample number), memory used the loads' caps (a load without a
// cap uses 80 % of its part of the card, or of its MIG instance), temperature +10 + 30 *
// share / 1000 + (jitter - 60) / 10, power from idle towards the board power in
// proportion to share and jitter, SM clock the model's boost clock. Free memory is the
// catalog memory less the used. MIG instances report their catalog memory, split the
// same way, and a GPU instance id (the smallest free one from 1, as NVML assigns).
//
// Fault injection: with FakeGpuOptions::faults_path, every ReadTelemetry first reads
// the lines added to that file since the last call (JSON lines, each ending in a
// newline; a file that shrank or was replaced is read again from its start; a missing
// file is no faults):
//   {"gpu":1,"xid":79}       one XID event: xid_count + 1, last_xid 79
//   {"gpu":0,"ecc_dbe":2}    uncorrected ECC errors, added to volatile and aggregate
//   {"gpu":0,"ecc_sbe":5}    corrected ones
//   {"gpu":2,"temp_c":95}    sticky temperature override; {"gpu":2,"temp_c":null} clears it
//   {"gpu":0,"util_pct":0}   sticky utilisation override 0..100 (an idle job); null clears it
//   {"gpu":3,"lost":true}    the GPU is lost (lost=true, zero readings); false: back
// A line may combine faults. A malformed line (bad JSON, unknown key, no such GPU, a
// value out of range) is skipped with one warning on stderr. A path that exists but is
// not a readable regular file makes ReadTelemetry fail (FailedPrecondition).
//
// Thread safety: one caller at a time (GpuBackend's rule).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"

namespace tessera {

// The GPUs a spec describes, in index order (model, mode, NUMA node, NVLink domain).
StatusOr<std::vector<GpuSpec>> ParseFakeGpuSpec(std::string_view spec, const GpuCatalog& catalog);

struct FakeGpuOptions {
  // The fault file (see above); "": no fault injection. The agent uses
  // <data dir>/fake-faults.
  std::string faults_path;
  // Seed of the utilisation jitter: the same spec, node, seed and calls give the same
  // readings.
  uint64_t seed = 0;
};

// `catalog` must outlive the backend.
StatusOr<std::unique_ptr<GpuBackend>> MakeFakeGpuBackend(std::string_view spec,
                                                         const GpuCatalog& catalog,
                                                         std::string_view node_name);
StatusOr<std::unique_ptr<GpuBackend>> MakeFakeGpuBackend(std::string_view spec,
                                                         const GpuCatalog& catalog,
                                                         std::string_view node_name,
                                                         const FakeGpuOptions& options);

// The product name NVML reports for a catalog model ("H100-80GB" ->
// "NVIDIA H100 80GB HBM3"); "NVIDIA <name>" for models without a known one.
std::string FakeProductName(const GpuModel& model);

// `prefix` + a UUID-shaped hash of `seed`: FakeUuid("GPU-", "GPU-fake-n1-0") ->
// "GPU-3f2a9c1e-07b4-5d21-8e6f-0123456789ab" (always the same for the same seed).
std::string FakeUuid(std::string_view prefix, std::string_view seed);

}  // namespace tessera
