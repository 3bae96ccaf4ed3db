#include "sim/cluster_preset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr int kNodesPerRack = 16;
constexpr int kNumaNodesPerNode = 2;
constexpr int kPhillyGpusPerNode = 8;
constexpr int kMaxGpusPerNode = 16;
constexpr int64_t kMaxNodes = 100'000;
constexpr std::string_view kPhillyCohort = "philly";
constexpr std::string_view kAcceptedForms =
    "expected \"philly-vc\" or NxGxMODEL such as \"64x8xH100-80GB\" (N >= 1 nodes of "
    "1..16 GPUs of a known model), or several joined by '+' for a mix of models";

// `count` nodes of `gpus` GPUs of `model`: 2 NUMA nodes with the GPUs split evenly,
// one NVLink domain per node, `kNodesPerRack` nodes per rack.
// Appends `count` nodes, numbered (and racked) after those already in `nodes`.
void AddNodes(int64_t count, int gpus, GpuModelId model, std::vector<NodeSpec>* nodes) {
  const int64_t first = static_cast<int64_t>(nodes->size());
  for (int64_t i = first; i < first + count; ++i) {
    NodeSpec n =
        MakeUniformNode("node-" + std::to_string(i), MilliCpu(kPresetCpuMilliPerGpu * gpus),
                        MiB(kPresetMemoryMiBPerGpu * gpus), model, gpus, SharingMode::kExclusive,
                        kNumaNodesPerNode, /*nvlink=*/true);
    n.labels.push_back({"rack", "r" + std::to_string(i / kNodesPerRack)});
    nodes->push_back(std::move(n));
  }
}

std::vector<NodeSpec> MakeNodes(int64_t count, int gpus, GpuModelId model) {
  std::vector<NodeSpec> nodes;
  nodes.reserve(static_cast<size_t>(count));
  AddNodes(count, gpus, model, &nodes);
  return nodes;
}

// The queue names of the trace's tenants, "" read as "default", duplicates dropped,
// first appearance order kept.
std::vector<std::string> TenantQueues(const std::vector<std::string>& tenants) {
  std::vector<std::string> out;
  std::set<std::string, std::less<>> seen;
  for (const std::string& t : tenants) {
    std::string name = t.empty() ? "default" : t;
    if (seen.insert(name).second) {
      out.push_back(std::move(name));
    }
  }
  return out;
}

QueueNodeSpec Queue(std::string name, std::string parent) {
  QueueNodeSpec q;
  q.name = std::move(name);
  q.parent = std::move(parent);
  return q;
}

struct PhillyVc {
  std::string name;
  int64_t nodes = 0;
};

// helios/summary/philly_vc.csv: vc,node num.
StatusOr<std::vector<PhillyVc>> ReadPhillyVcs(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return NotFoundError("cannot open '" + path + "'");
  }
  std::vector<PhillyVc> vcs;
  std::set<std::string, std::less<>> seen;
  std::string line;
  int line_no = 0;
  int vc_col = -1, nodes_col = -1;
  size_t fields = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (Trim(line).empty()) {
      continue;
    }
    std::vector<std::string_view> cells = Split(line, ',');
    for (std::string_view& c : cells) {
      c = Trim(c);
    }
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (fields == 0) {
      fields = cells.size();
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "vc") {
          vc_col = static_cast<int>(i);
        } else if (cells[i] == "node num") {
          nodes_col = static_cast<int>(i);
        }
      }
      if (vc_col < 0 || nodes_col < 0) {
        return InvalidArgumentError(where + "expected the columns 'vc' and 'node num', got '" +
                                    std::string(Trim(line)) + "'");
      }
      continue;
    }
    if (cells.size() != fields) {
      return InvalidArgumentError(where + std::to_string(cells.size()) + " fields, header has " +
                                  std::to_string(fields));
    }
    PhillyVc vc;
    vc.name = std::string(cells[static_cast<size_t>(vc_col)]);
    if (vc.name.empty()) {
      return InvalidArgumentError(where + "column 'vc': empty");
    }
    if (vc.name == kPhillyCohort) {
      return InvalidArgumentError(where + "column 'vc': '" + vc.name +
                                  "' is the name of the cohort");
    }
    if (!seen.insert(vc.name).second) {
      return InvalidArgumentError(where + "column 'vc': '" + vc.name + "' appears twice");
    }
    StatusOr<int64_t> n = ParseInt64(cells[static_cast<size_t>(nodes_col)]);
    if (!n.ok()) {
      return InvalidArgumentError(where + "column 'node num': " + n.status().message());
    }
    if (*n < 0 || *n > kMaxNodes) {
      return InvalidArgumentError(where + "column 'node num': must be in 0.." +
                                  std::to_string(kMaxNodes) + ", got " + std::to_string(*n));
    }
    vc.nodes = *n;
    vcs.push_back(std::move(vc));
  }
  if (fields == 0) {
    return InvalidArgumentError("'" + path + "' is empty");
  }
  return vcs;
}

StatusOr<ClusterSetup> PhillyVcPreset(const std::vector<std::string>& tenants,
                                      const std::string& traces_dir, const GpuCatalog& catalog) {
  const std::string path =
      (std::filesystem::path(traces_dir) / "helios" / "summary" / "philly_vc.csv").string();
  TESSERA_ASSIGN_OR_RETURN(std::vector<PhillyVc> vcs, ReadPhillyVcs(path));
  StatusOr<GpuModelId> p100 = catalog.Find("P100");
  if (!p100.ok()) {
    return InvalidArgumentError("philly-vc needs GPU model P100, which the catalog lacks");
  }
  int64_t total_nodes = 0;
  for (const PhillyVc& vc : vcs) {
    total_nodes += vc.nodes;
  }
  if (total_nodes > kMaxNodes) {
    return InvalidArgumentError("'" + path + "' has " + std::to_string(total_nodes) +
                                " nodes, more than " + std::to_string(kMaxNodes));
  }
  ClusterSetup setup;
  setup.gpus_per_node = kPhillyGpusPerNode;
  setup.nodes = MakeNodes(total_nodes, kPhillyGpusPerNode, *p100);

  QueueNodeSpec cohort;
  cohort.name = std::string(kPhillyCohort);
  cohort.cohort = true;
  setup.queues.nodes.push_back(std::move(cohort));
  std::set<std::string, std::less<>> named;
  for (const PhillyVc& vc : vcs) {
    QueueNodeSpec q = Queue(vc.name, std::string(kPhillyCohort));
    QueueQuota quota;
    quota.resource = ResourceName{ResourceKind::kGpu, GpuModelId()};
    quota.quota.nominal = vc.nodes * kPhillyGpusPerNode * kMilliPerGpu;
    q.quotas.push_back(quota);
    setup.queues.nodes.push_back(std::move(q));
    named.insert(vc.name);
  }
  for (std::string& t : TenantQueues(tenants)) {
    if (t == kPhillyCohort) {
      return InvalidArgumentError(
          "the trace's tenant 'philly' clashes with the cohort of "
          "the philly-vc preset");
    }
    if (!named.contains(t)) {
      named.insert(t);
      setup.queues.nodes.push_back(Queue(std::move(t), std::string(kPhillyCohort)));
    }
  }
  return setup;
}

struct NodeGroup {
  int64_t count = 0;
  int gpus = 0;
  GpuModelId model;
};

StatusOr<NodeGroup> ParseNodeGroup(std::string_view spec, std::string_view part,
                                   const GpuCatalog& catalog) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("cluster preset '" + std::string(spec) + "': " + why + "; " +
                                std::string(kAcceptedForms));
  };
  part = Trim(part);
  const size_t x1 = part.find('x');
  const size_t x2 = x1 == std::string_view::npos ? x1 : part.find('x', x1 + 1);
  if (x2 == std::string_view::npos) {
    return bad(part == spec ? std::string("unknown preset")
                            : "'" + std::string(part) + "' is not NxGxMODEL");
  }
  StatusOr<int64_t> n = ParseInt64(part.substr(0, x1));
  StatusOr<int64_t> g = ParseInt64(part.substr(x1 + 1, x2 - x1 - 1));
  const std::string_view model_name = part.substr(x2 + 1);
  if (!n.ok()) {
    return bad("node count: " + n.status().message());
  }
  if (!g.ok()) {
    return bad("GPUs per node: " + g.status().message());
  }
  if (*n < 1 || *n > kMaxNodes) {
    return bad("node count must be in 1.." + std::to_string(kMaxNodes) + ", got " +
               std::to_string(*n));
  }
  if (*g < 1 || *g > kMaxGpusPerNode) {
    return bad("GPUs per node must be in 1.." + std::to_string(kMaxGpusPerNode) + ", got " +
               std::to_string(*g));
  }
  StatusOr<GpuModelId> model = catalog.Find(Trim(model_name));
  if (!model.ok()) {
    return bad("unknown GPU model '" + std::string(model_name) + "'");
  }
  return NodeGroup{*n, static_cast<int>(*g), *model};
}

// "NxGxMODEL", or several joined by '+' (a heterogeneous cluster). Jobs are split into
// tasks of at most the smallest node's GPUs, so that every task fits every node.
StatusOr<ClusterSetup> GenericPreset(std::string_view spec, const std::vector<std::string>& tenants,
                                     const GpuCatalog& catalog) {
  ClusterSetup setup;
  for (std::string_view part : Split(spec, '+')) {
    TESSERA_ASSIGN_OR_RETURN(NodeGroup group, ParseNodeGroup(spec, part, catalog));
    if (static_cast<int64_t>(setup.nodes.size()) + group.count > kMaxNodes) {
      return InvalidArgumentError("cluster preset '" + std::string(spec) + "': more than " +
                                  std::to_string(kMaxNodes) + " nodes");
    }
    AddNodes(group.count, group.gpus, group.model, &setup.nodes);
    setup.gpus_per_node =
        setup.gpus_per_node == 0 ? group.gpus : std::min(setup.gpus_per_node, group.gpus);
  }
  std::vector<std::string> queues = TenantQueues(tenants);
  if (queues.empty()) {
    queues.push_back("default");
  }
  for (std::string& q : queues) {
    setup.queues.nodes.push_back(Queue(std::move(q), ""));
  }
  return setup;
}

}  // namespace

StatusOr<ClusterSetup> MakeClusterPreset(std::string_view spec,
                                         const std::vector<std::string>& tenants,
                                         const std::string& traces_dir, const GpuCatalog& catalog) {
  spec = Trim(spec);
  if (spec == "philly-vc") {
    return PhillyVcPreset(tenants, traces_dir, catalog);
  }
  return GenericPreset(spec, tenants, catalog);
}

}  // namespace tessera
