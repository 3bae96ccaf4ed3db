// A fake GPU inventory built from a spec string, for tests, demos and machines
// without GPUs. It behaves like the NVML backend: MIG instances obey the catalog's
// placement rules, created instances appear in Discover(), and errors carry the same
// codes (see gpu_backend.h).
//
// Spec grammar: comma-separated items. A group item is "[N x] G x MODEL[:MODE]": N
// groups (default 1) of G GPUs of catalog model MODEL, MODE one of exclusive|mig|shared
// (default exclusive). Each group is one NVLink domain and one NUMA node, numbered in
// order from 0 (a group of one GPU has no NVLink peer: domain -1). A bare item "mig",
// "shared" or "exclusive" sets the mode of every group without an explicit one. ""
// or "none" is a machine without GPUs. At most 64 GPUs.
//   "8xH100-80GB"                         8 GPUs, one domain, NUMA node 0
//   "2x4xA100-80GB,mig"                   8 GPUs in two NVLink/NUMA groups of 4, MIG mode
//   "2x8xH100-80GB,1xA100-80GB:mig,1xA100-80GB:shared"
// Invalid specs give InvalidArgument naming the bad item.
//
// UUIDs are stable per (node name, GPU index): the UUID form of
// "GPU-fake-<node>-<index>"; MIG instance UUIDs are stable per (node, GPU, creation
// order). The fake reports no CPU affinity (cpus is empty).
//
// Thread safety: one caller at a time (GpuBackend's rule).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_backend.h"
#include "base/status.h"
#include "model/gpu_catalog.h"
#include "model/node.h"

namespace tessera {

// The GPUs a spec describes, in index order (model, mode, NUMA node, NVLink domain).
StatusOr<std::vector<GpuSpec>> ParseFakeGpuSpec(std::string_view spec, const GpuCatalog& catalog);

// `catalog` must outlive the backend.
StatusOr<std::unique_ptr<GpuBackend>> MakeFakeGpuBackend(std::string_view spec,
                                                         const GpuCatalog& catalog,
                                                         std::string_view node_name);

// The product name NVML reports for a catalog model ("H100-80GB" ->
// "NVIDIA H100 80GB HBM3"); "NVIDIA <name>" for models without a known one.
std::string FakeProductName(const GpuModel& model);

// `prefix` + a UUID-shaped hash of `seed`: FakeUuid("GPU-", "GPU-fake-n1-0") ->
// "GPU-3f2a9c1e-07b4-5d21-8e6f-0123456789ab" (always the same for the same seed).
std::string FakeUuid(std::string_view prefix, std::string_view seed);

}  // namespace tessera
