#include "server/inventory_bounds.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "api/node_labels.h"
#include "model/node.h"

namespace tessera {
namespace {

// Bounds on what an agent may claim. Generous for real machines; small enough that a
// forged inventory cannot make the scheduler's per-node structures huge.
constexpr size_t kMaxNodeName = 253;  // a DNS name
constexpr int64_t kMaxCpuMilli = int64_t{16384} * 1000;
constexpr int64_t kMaxMemoryMib = int64_t{64} * 1024 * 1024;  // 64 TiB
constexpr size_t kMaxGpus = 64;
constexpr size_t kMaxUuid = 128;
constexpr size_t kMaxMigInstances = 7;  // the most any MIG-capable GPU partitions into
constexpr size_t kMaxMigProfile = 64;

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}

bool IsPrintable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

}  // namespace

Status CheckInventoryBounds(const NodeInventory& inventory) {
  const NodeSpec& spec = inventory.spec;
  // The name travels in URLs (/v1/nodes/{name}) and store keys: a plain host name only.
  if (spec.name.empty() || spec.name.size() > kMaxNodeName ||
      !std::all_of(spec.name.begin(), spec.name.end(), IsNameChar) || spec.name.front() == '.' ||
      spec.name.front() == '-') {
    return InvalidArgumentError(
        "inventory.name: a node name is 1 to " + std::to_string(kMaxNodeName) +
        " letters, digits, '-', '_' or '.', got '" + spec.name.substr(0, 64) + "'");
  }
  if (spec.cpu.value() < 0 || spec.cpu.value() > kMaxCpuMilli) {
    return InvalidArgumentError("inventory.cpu_milli: must be between 0 and " +
                                std::to_string(kMaxCpuMilli) + ", got " +
                                std::to_string(spec.cpu.value()));
  }
  if (spec.memory.value() < 0 || spec.memory.value() > kMaxMemoryMib) {
    return InvalidArgumentError("inventory.memory_mib: must be between 0 and " +
                                std::to_string(kMaxMemoryMib) + ", got " +
                                std::to_string(spec.memory.value()));
  }
  if (spec.gpus.size() > kMaxGpus) {
    return InvalidArgumentError("inventory.gpus: at most " + std::to_string(kMaxGpus) +
                                " GPUs, got " + std::to_string(spec.gpus.size()));
  }
  // Labels end up in metrics, views and the scheduler's groups: the agent's own syntax.
  if (Status labels = ValidateNodeLabels(spec.labels); !labels.ok()) {
    return InvalidArgumentError("inventory." + labels.message());
  }
  if (inventory.gpu_uuids.size() > spec.gpus.size()) {
    return InvalidArgumentError("inventory.gpus.uuid: more UUIDs than GPUs");
  }
  for (size_t g = 0; g < inventory.gpu_uuids.size(); ++g) {
    const std::string& uuid = inventory.gpu_uuids[g];
    if (uuid.size() > kMaxUuid || !IsPrintable(uuid)) {
      return InvalidArgumentError("inventory.gpus[" + std::to_string(g) + "].uuid: at most " +
                                  std::to_string(kMaxUuid) + " printable characters");
    }
  }
  if (inventory.mig_instances.size() > spec.gpus.size()) {
    return InvalidArgumentError("inventory.gpus.mig_instances: more MIG lists than GPUs");
  }
  for (size_t g = 0; g < inventory.mig_instances.size(); ++g) {
    const auto& list = inventory.mig_instances[g];
    const std::string at = "inventory.gpus[" + std::to_string(g) + "].mig_instances";
    if (list.size() > kMaxMigInstances) {
      return InvalidArgumentError(at + ": at most " + std::to_string(kMaxMigInstances) +
                                  " MIG instances, got " + std::to_string(list.size()));
    }
    for (const NodeMigInstance& m : list) {
      if (m.uuid.size() > kMaxUuid || !IsPrintable(m.uuid) || m.profile.size() > kMaxMigProfile ||
          m.start < -1 || m.start > 64) {
        return InvalidArgumentError(at + ": a MIG instance's uuid (at most " +
                                    std::to_string(kMaxUuid) + " characters), profile or start " +
                                    "is out of bounds");
      }
    }
  }
  return Status::Ok();
}

Status ValidateInventory(const NodeInventory& inventory, const GpuCatalog& catalog) {
  TESSERA_RETURN_IF_ERROR(CheckInventoryBounds(inventory));
  return ValidateNodeSpec(inventory.spec, catalog);
}

}  // namespace tessera
