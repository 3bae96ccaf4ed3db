#include "sim/openb_trace.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "base/rng.h"
#include "base/strings.h"

namespace tessera {
namespace {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> line_numbers;
};

StatusOr<CsvTable> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return NotFoundError("cannot open '" + path + "'");
  }
  CsvTable t;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view text = Trim(line);
    if (text.empty()) {
      continue;
    }
    std::vector<std::string> cells;
    for (std::string_view c : Split(text, ',')) {
      cells.emplace_back(Trim(c));
    }
    if (t.header.empty()) {
      t.header = std::move(cells);
      continue;
    }
    if (cells.size() > t.header.size()) {
      return InvalidArgumentError(path + ":" + std::to_string(line_no) + ": " +
                                  std::to_string(cells.size()) + " fields, header has " +
                                  std::to_string(t.header.size()));
    }
    cells.resize(t.header.size());
    t.rows.push_back(std::move(cells));
    t.line_numbers.push_back(line_no);
  }
  if (t.header.empty()) {
    return InvalidArgumentError("'" + path + "' is empty");
  }
  return t;
}

StatusOr<std::map<std::string, size_t>> Columns(const CsvTable& t, const std::string& path,
                                                const std::vector<std::string>& required) {
  std::map<std::string, size_t> cols;
  for (size_t i = 0; i < t.header.size(); ++i) {
    cols[t.header[i]] = i;
  }
  for (const std::string& r : required) {
    if (!cols.contains(r)) {
      return InvalidArgumentError("'" + path + "' has no column '" + r +
                                  "' (header: " + Join(t.header, ",") + ")");
    }
  }
  return cols;
}

StatusOr<int64_t> Field(const CsvTable& t, size_t row, size_t col, const std::string& path,
                        int64_t min_value) {
  StatusOr<int64_t> v = ParseInt64(t.rows[row][col]);
  std::string where =
      path + ":" + std::to_string(t.line_numbers[row]) + ": column '" + t.header[col] + "': ";
  if (!v.ok()) {
    return InvalidArgumentError(where + v.status().message());
  }
  if (*v < min_value) {
    return InvalidArgumentError(where + "must be at least " + std::to_string(min_value) + ", got " +
                                std::to_string(*v));
  }
  return *v;
}

}  // namespace

std::vector<TaskRequest> PodList::Requests() const {
  std::vector<TaskRequest> out;
  out.reserve(pods.size());
  for (const TracePod& p : pods) {
    out.push_back(p.request);
  }
  return out;
}

std::string TraceNameFromPath(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (EndsWith(base, ".csv")) {
    base.resize(base.size() - 4);
  }
  const std::string prefix = "openb_pod_list_";
  if (StartsWith(base, prefix)) {
    base = base.substr(prefix.size());
  }
  return base;
}

StatusOr<std::vector<NodeSpec>> ReadOpenbNodes(const std::string& path, const GpuCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsv(path));
  TESSERA_ASSIGN_OR_RETURN(auto cols,
                           Columns(t, path, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<NodeSpec> nodes;
  nodes.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    TESSERA_ASSIGN_OR_RETURN(int64_t cpu, Field(t, r, cols["cpu_milli"], path, 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t mem, Field(t, r, cols["memory_mib"], path, 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t gpus, Field(t, r, cols["gpu"], path, 0));
    if (gpus > 64) {
      return InvalidArgumentError(path + ":" + std::to_string(t.line_numbers[r]) +
                                  ": more than 64 GPUs on one node");
    }
    GpuModelId model;
    if (gpus > 0) {
      StatusOr<GpuModelId> m = catalog.Find(t.rows[r][cols["model"]]);
      if (!m.ok()) {
        return InvalidArgumentError(path + ":" + std::to_string(t.line_numbers[r]) + ": " +
                                    m.status().message());
      }
      model = *m;
    }
    NodeSpec n = MakeUniformNode(t.rows[r][cols["sn"]], MilliCpu(cpu), MiB(mem), model,
                                 static_cast<int>(gpus), SharingMode::kShared);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

StatusOr<PodList> ReadOpenbPods(const std::string& path, const GpuCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsv(path));
  TESSERA_ASSIGN_OR_RETURN(
      auto cols, Columns(t, path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}));
  const bool has_spec = cols.contains("gpu_spec");
  PodList list;
  list.trace = TraceNameFromPath(path);
  list.pods.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const std::string where = path + ":" + std::to_string(t.line_numbers[r]) + ": ";
    TracePod pod;
    pod.name = t.rows[r][cols["name"]];
    if (pod.name.empty()) {
      return InvalidArgumentError(where + "pod has no name");
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t cpu, Field(t, r, cols["cpu_milli"], path, 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t mem, Field(t, r, cols["memory_mib"], path, 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t num_gpu, Field(t, r, cols["num_gpu"], path, 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t milli, Field(t, r, cols["gpu_milli"], path, 0));
    if (num_gpu > RequestLimits{}.max_gpus_per_task) {
      return InvalidArgumentError(where + "num_gpu " + std::to_string(num_gpu) +
                                  " is beyond the limit of " +
                                  std::to_string(RequestLimits{}.max_gpus_per_task));
    }
    TaskRequest& req = pod.request;
    req.cpu = MilliCpu(cpu);
    req.memory = MiB(mem);
    if (num_gpu > 0) {
      if (milli == 0) {
        ++list.zero_milli_gpu_pods;
      } else {
        req.gpu_count = static_cast<int>(num_gpu);
        req.gpu_milli = MilliGpu(std::min<int64_t>(milli, kMilliPerGpu));
        if (req.gpu_count > 1) {
          req.gpu_milli = kWholeGpu;
        }
        if (has_spec) {
          StatusOr<GpuModelSet> models = catalog.ParseModelSet(t.rows[r][cols["gpu_spec"]]);
          if (!models.ok()) {
            return InvalidArgumentError(where + models.status().message());
          }
          req.models = *models;
        }
      }
    }
    Status valid = ValidateTaskRequest(req, catalog);
    if (!valid.ok()) {
      return InvalidArgumentError(where + valid.message());
    }
    list.pods.push_back(std::move(pod));
  }
  return list;
}

std::string PinnedTraceName(const std::string& trace, const PinSpec& spec) {
  if (spec.percent == 0) {
    return trace;
  }
  const char* suffix = spec.mode == PinMode::kSingle   ? "one"
                       : spec.mode == PinMode::kScarce ? "scarce"
                                                       : "";
  return trace + "-pin" + std::to_string(spec.percent) + suffix;
}

namespace {

// A GPU model as a pod could use it: the nodes of that model that could host the pod
// alone, and their GPUs.
struct FittingModel {
  GpuModelId model;
  int64_t gpus = 0;
  int64_t nodes = 0;
};

// The models of the homogeneous GPU nodes that could host `r` alone, by model id (a
// fixed order, so draws depend on the models, not on the node list's order).
std::vector<FittingModel> FittingModels(const TaskRequest& r, const std::vector<NodeSpec>& nodes) {
  std::vector<FittingModel> fitting;
  for (const NodeSpec& n : nodes) {
    if (n.gpus.empty() || !n.Homogeneous() || n.cpu < r.cpu || n.memory < r.memory ||
        static_cast<int>(n.gpus.size()) < r.gpu_count) {
      continue;
    }
    const GpuModelId m = n.gpus[0].model;
    auto it =
        std::find_if(fitting.begin(), fitting.end(), [&](const auto& f) { return f.model == m; });
    if (it == fitting.end()) {
      fitting.push_back(FittingModel{m});
      it = fitting.end() - 1;
    }
    it->gpus += static_cast<int64_t>(n.gpus.size());
    ++it->nodes;
  }
  std::sort(fitting.begin(), fitting.end(),
            [](const FittingModel& a, const FittingModel& b) { return a.model < b.model; });
  return fitting;
}

// kSingle and kSubset: `k` of the fitting models, drawn without replacement in
// proportion to their GPUs.
GpuModelSet DrawBySupply(std::vector<FittingModel> fitting, size_t k, Pcg32& rng) {
  GpuModelSet models;
  for (size_t drawn = 0; drawn < k; ++drawn) {
    int64_t total = 0;
    for (const FittingModel& f : fitting) {
      total += f.gpus;
    }
    auto pick = static_cast<int64_t>(rng.UniformDouble() * static_cast<double>(total));
    size_t j = 0;
    while (j + 1 < fitting.size() && pick >= fitting[j].gpus) {
      pick -= fitting[j].gpus;
      ++j;
    }
    models.Add(fitting[j].model);
    fitting.erase(fitting.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return models;
}

// kScarce: the scarcest fitting model (fewest nodes, then fewest GPUs) whose pinned
// demand is still below its budget, the list's GPU demand times the model's share of
// the cluster's GPUs; when every fitting model has had its share, the least scarce.
// Pinned demand alone then asks each scarce model for as much as it has.
GpuModelId ScarcestWithRoom(std::vector<FittingModel> fitting, const std::vector<int64_t>& budget,
                            const std::vector<int64_t>& pinned) {
  std::sort(fitting.begin(), fitting.end(), [](const FittingModel& a, const FittingModel& b) {
    return std::tie(a.nodes, a.gpus, a.model) < std::tie(b.nodes, b.gpus, b.model);
  });
  for (const FittingModel& f : fitting) {
    if (pinned[f.model.value()] < budget[f.model.value()]) {
      return f.model;
    }
  }
  return fitting.back().model;
}

int64_t GpuDemand(const TaskRequest& r) {
  return r.cpu_only() ? 0 : r.gpu_milli.value() * r.gpu_count;
}

// Each model's budget for kScarce (see ScarcestWithRoom), in milli-GPU.
std::vector<int64_t> ScarceBudgets(const PodList& pods, const std::vector<NodeSpec>& nodes) {
  std::vector<int64_t> gpus(GpuModelSet::kMaxModels, 0);
  int64_t all_gpus = 0;
  for (const NodeSpec& n : nodes) {
    for (const auto& g : n.gpus) {
      ++gpus[g.model.value()];
      ++all_gpus;
    }
  }
  int64_t demand = 0;
  for (const TracePod& p : pods.pods) {
    demand += GpuDemand(p.request);
  }
  std::vector<int64_t> budget(GpuModelSet::kMaxModels, 0);
  for (size_t m = 0; m < budget.size() && all_gpus > 0; ++m) {
    budget[m] = demand * gpus[m] / all_gpus;
  }
  return budget;
}

}  // namespace

StatusOr<PodList> PinPodsToModels(const PodList& pods, const std::vector<NodeSpec>& nodes,
                                  const PinSpec& spec) {
  if (spec.percent < 0 || spec.percent > 100) {
    return InvalidArgumentError("pin percent must be in 0..100, got " +
                                std::to_string(spec.percent));
  }
  PodList out = pods;
  out.trace = PinnedTraceName(pods.trace, spec);
  std::vector<size_t> gpu_pods;
  for (size_t i = 0; i < pods.pods.size(); ++i) {
    const TaskRequest& r = pods.pods[i].request;
    if (!r.cpu_only() && r.models.empty()) {
      gpu_pods.push_back(i);
    }
  }
  Pcg32 rng(spec.seed);
  // The first `pinned` of a shuffled copy are pinned. kScarce visits them in the
  // shuffled order, so which pods fill the scarce models does not follow pod names;
  // the others in list order, so each pod's draw does not depend on the shuffle's
  // later steps.
  rng.Shuffle(std::span<size_t>(gpu_pods));
  const auto pinned = static_cast<size_t>(
      (static_cast<int64_t>(gpu_pods.size()) * spec.percent + 50) / 100);
  gpu_pods.resize(pinned);
  if (spec.mode != PinMode::kScarce) {
    std::sort(gpu_pods.begin(), gpu_pods.end());
  }
  const std::vector<int64_t> budget =
      spec.mode == PinMode::kScarce ? ScarceBudgets(pods, nodes) : std::vector<int64_t>{};
  std::vector<int64_t> pinned_demand(GpuModelSet::kMaxModels, 0);
  for (size_t i : gpu_pods) {
    TaskRequest& r = out.pods[i].request;
    std::vector<FittingModel> fitting = FittingModels(r, nodes);
    if (fitting.empty()) {
      continue;
    }
    if (spec.mode == PinMode::kScarce) {
      const GpuModelId m = ScarcestWithRoom(std::move(fitting), budget, pinned_demand);
      pinned_demand[m.value()] += GpuDemand(r);
      r.models = GpuModelSet();
      r.models.Add(m);
      continue;
    }
    const size_t k = spec.mode == PinMode::kSingle
                         ? 1
                         : 1 + rng.Uniform(static_cast<uint32_t>(fitting.size()));
    r.models = DrawBySupply(std::move(fitting), k, rng);
  }
  return out;
}

}  // namespace tessera
