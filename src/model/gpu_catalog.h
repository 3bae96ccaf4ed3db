// GpuCatalog: the GPU models Tessera knows, with memory and MIG geometry.
//
// A MIG-capable GPU has 8 memory slices (slots 0..7) and 7 compute slices. A GPU
// instance profile (e.g. "3g.40gb") takes `compute_slices` compute slices and a run
// of `memory_slots` consecutive memory slots that must begin at one of `starts`
// (NVIDIA's placement table, `nvidia-smi mig -lgipp`). Two instances on one GPU are
// legal together when their slot runs do not overlap and their compute slices add
// up to at most 7; at most `max_instances` of a profile exist at once.
//
// The catalog is immutable after construction; GpuCatalog::Default() is built once
// and is safe to read from any thread.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/quantity.h"
#include "base/status.h"
#include "base/strong_id.h"

namespace tessera {

inline constexpr int kMigMemorySlots = 8;
inline constexpr int kMigComputeSlices = 7;

struct MigProfile {
  std::string name;         // "1g.10gb", "3g.40gb", "1g.10gb+me"
  int compute_slices = 0;   // 1..7
  int memory_slots = 0;     // length of the slot run: 1, 2, 4 or 8
  MiB memory{0};            // memory of the instance as NVML reports it
  int max_instances = 0;    // at most this many of the profile on one GPU
  std::vector<int> starts;  // legal first slots of the run
  bool media_extensions = false;

  // The whole-card share this instance stands for, in milli-GPU, so that MIG
  // slices are charged to quotas and fair share like any other share.
  MilliGpu ChargedMilli() const {
    return MilliGpu(compute_slices * kMilliPerGpu / kMigComputeSlices);
  }
};

struct GpuModel {
  GpuModelId id;
  std::string name;                      // canonical name, e.g. "H100-80GB"
  std::vector<std::string> aliases;      // other spellings accepted on input
  MiB memory{0};                         // 0: not disclosed (anonymised trace models)
  std::vector<MigProfile> mig_profiles;  // empty: no MIG

  bool mig_capable() const { return !mig_profiles.empty(); }
  // Index into mig_profiles, or nullopt when the model has no such profile.
  std::optional<int> FindMigProfile(std::string_view profile_name) const;
};

// A set of GPU models (a task's model constraint). Empty means "any model".
class GpuModelSet {
 public:
  static constexpr size_t kMaxModels = 64;

  void Add(GpuModelId id) { bits_.set(id.value()); }
  bool Contains(GpuModelId id) const { return bits_.test(id.value()); }
  bool empty() const { return bits_.none(); }
  size_t size() const { return bits_.count(); }
  // True when the set is empty (no constraint) or holds `id`.
  bool Allows(GpuModelId id) const { return empty() || Contains(id); }
  bool operator==(const GpuModelSet&) const = default;
  uint64_t bits() const { return bits_.to_ullong(); }

 private:
  std::bitset<kMaxModels> bits_;
};

class GpuCatalog {
 public:
  // The built-in catalog: data-centre and inference models with NVIDIA's MIG tables,
  // plus the anonymised models of the Alibaba GPU trace.
  static const GpuCatalog& Default();

  explicit GpuCatalog(std::vector<GpuModel> models);

  // Case-insensitive lookup by canonical name or alias.
  StatusOr<GpuModelId> Find(std::string_view name) const;
  const GpuModel& Get(GpuModelId id) const { return models_[id.value()]; }
  const std::vector<GpuModel>& models() const { return models_; }
  size_t size() const { return models_.size(); }

  // Parses a `|`-separated model list such as "V100M16|V100M32"; "" is the empty set.
  StatusOr<GpuModelSet> ParseModelSet(std::string_view spec) const;

 private:
  std::vector<GpuModel> models_;
};

}  // namespace tessera
