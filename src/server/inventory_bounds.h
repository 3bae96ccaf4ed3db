// Upper bounds on what an agent may claim at registration: its node's name, CPU,
// memory, GPU count, labels, GPU UUIDs and MIG instances. Generous for real machines;
// small enough that a forged inventory cannot make the scheduler's per-node structures
// huge, and the name is a plain host name (it travels in URLs and store keys).
// Pure: no state, safe from any thread.
#pragma once

#include "api/agent_protocol.h"
#include "base/status.h"
#include "model/gpu_catalog.h"

namespace tessera {

// InvalidArgument naming the first field out of bounds ("inventory.<field>: ...").
// Checks bounds only: a spec's meaning (GPU models, modes) is ValidateNodeSpec's.
Status CheckInventoryBounds(const NodeInventory& inventory);

// What a registration's inventory must pass: its bounds (CheckInventoryBounds, which
// refuses an empty name), then its spec's meaning against `catalog` (ValidateNodeSpec).
Status ValidateInventory(const NodeInventory& inventory, const GpuCatalog& catalog);

}  // namespace tessera
