// The nodes' JSON (GET /v1/nodes, a drain's and a resume's answer), from typed inputs
// the core gathers under its lock: the node registry's nodes, who holds each GPU, what
// running tasks use of each node, and why a module holds a node; and the gathers of the
// last three.
//
// A view: it owns nothing and changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "model/gpu_catalog.h"
#include "server/http/auth.h"
#include "server/job_table.h"
#include "server/node_registry.h"
#include "server/views/gpu_holds.h"

namespace tessera {

struct NodeViewInputs {
  const std::map<std::string, NodeInfo>& nodes;
  const GpuHolds& holds;
  // CPU (milli) and memory (MiB) that running tasks hold on each node.
  const std::map<std::string, std::pair<int64_t, int64_t>>& used;
  const GpuCatalog& catalog;
  // Why a feature module holds a node back from new work (nodes no module holds: absent).
  const std::map<std::string, std::string>& module_holds;
};

// The nodes (or only node `only`) as `viewer` may see them: a tenant sees which tenant
// holds each GPU but not the ids or names of other tenants' jobs; null or the admin:
// everything.
nlohmann::json NodesJson(const NodeViewInputs& in, const std::string& only,
                         const Principal* viewer);

// What the running and stopping jobs of `jobs` hold through their tasks that have not
// exited (on every node, or only on `only`): who holds each GPU (pointers into `jobs`)
// and the CPU (milli) and memory (MiB) held of each node.
struct NodeUse {
  GpuHolds holds;
  std::map<std::string, std::pair<int64_t, int64_t>> used;
};
NodeUse NodeUseOf(const JobTable& jobs, const std::string& only);

// Why `hold` (a feature module's hold of a node; "": none) holds each of `nodes` (or only
// `only`): the nodes it holds.
std::map<std::string, std::string> ModuleHoldsOf(
    const std::map<std::string, NodeInfo>& nodes, const std::string& only,
    const std::function<std::string(const std::string&)>& hold);

// A node's or GPU's drain (null when there is none).
nlohmann::json DrainJson(const std::optional<DrainInfo>& drain);

}  // namespace tessera
