#include "model/node.h"

#include <algorithm>

namespace tessera {

std::string_view SharingModeName(SharingMode mode) {
  switch (mode) {
    case SharingMode::kExclusive:
      return "exclusive";
    case SharingMode::kMig:
      return "mig";
    case SharingMode::kShared:
      return "shared";
    case SharingMode::kTimeslice:
      return "timeslice";
  }
  return "unknown";
}

StatusOr<SharingMode> ParseSharingMode(std::string_view name) {
  if (name == "exclusive") {
    return SharingMode::kExclusive;
  }
  if (name == "mig") {
    return SharingMode::kMig;
  }
  if (name == "shared") {
    return SharingMode::kShared;
  }
  if (name == "timeslice") {
    return SharingMode::kTimeslice;
  }
  return InvalidArgumentError("unknown sharing mode '" + std::string(name) +
                              "' (expected exclusive, mig, shared or timeslice)");
}

StatusOr<GpuSharing> ParseGpuSharing(std::string_view text) {
  const size_t sep = text.find_first_of("=:");
  TESSERA_ASSIGN_OR_RETURN(SharingMode mode, ParseSharingMode(text.substr(0, sep)));
  GpuSharing out{mode, 0};
  if (mode != SharingMode::kTimeslice) {
    if (sep != std::string_view::npos) {
      return InvalidArgumentError("'" + std::string(text) + "': only timeslice takes a count");
    }
    return out;
  }
  const std::string_view count =
      sep == std::string_view::npos ? std::string_view() : text.substr(sep + 1);
  int n = 0;
  bool digits = !count.empty() && count.size() <= 3;
  for (char c : count) {
    digits = digits && c >= '0' && c <= '9';
    n = n * 10 + (c - '0');
  }
  if (!digits || n < kMinTimesliceReplicas || n > kMaxTimesliceReplicas) {
    return InvalidArgumentError("'" + std::string(text) + "': timeslice needs a replica count " +
                                std::to_string(kMinTimesliceReplicas) + ".." +
                                std::to_string(kMaxTimesliceReplicas) + ", e.g. timeslice=4");
  }
  out.replicas = n;
  return out;
}

std::string GpuSharingText(const GpuSharing& sharing) {
  std::string text(SharingModeName(sharing.mode));
  if (sharing.mode == SharingMode::kTimeslice) {
    text += "=" + std::to_string(sharing.replicas);
  }
  return text;
}

bool MpsServesOneUser(const NodeSpec& spec) {
  return spec.Label(kMpsLabel) == "on" && spec.Label(kMpsMultiUserLabel) != "on";
}

std::string_view NodeSpec::Label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) {
      return v;
    }
  }
  return {};
}

bool NodeSpec::Homogeneous() const {
  return std::all_of(gpus.begin(), gpus.end(),
                     [&](const GpuSpec& g) { return g.model == gpus.front().model; });
}

Status ValidateNodeSpec(const NodeSpec& spec, const GpuCatalog& catalog) {
  const std::string where = "node '" + spec.name + "': ";
  if (spec.name.empty()) {
    return InvalidArgumentError("node name is empty");
  }
  if (spec.cpu.value() < 0 || spec.memory.value() < 0) {
    return InvalidArgumentError(where + "CPU and memory must not be negative");
  }
  if (spec.numa_nodes < 1 || spec.numa_nodes > 64) {
    return InvalidArgumentError(where + "numa_nodes must be in 1..64");
  }
  if (spec.gpus.size() > 64) {
    return InvalidArgumentError(where + "more than 64 GPUs on one node");
  }
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    const GpuSpec& g = spec.gpus[i];
    if (!g.model.valid() || g.model.value() >= catalog.size()) {
      return InvalidArgumentError(where + "GPU " + std::to_string(i) + " has an unknown model");
    }
    if (g.numa_node < 0 || g.numa_node >= spec.numa_nodes) {
      return InvalidArgumentError(where + "GPU " + std::to_string(i) + " is on NUMA node " +
                                  std::to_string(g.numa_node) + " of " +
                                  std::to_string(spec.numa_nodes));
    }
    if (g.mode == SharingMode::kMig && !catalog.Get(g.model).mig_capable()) {
      return InvalidArgumentError(where + "GPU " + std::to_string(i) + " (" +
                                  catalog.Get(g.model).name + ") does not support MIG");
    }
    if (g.mode == SharingMode::kTimeslice &&
        (g.replicas < kMinTimesliceReplicas || g.replicas > kMaxTimesliceReplicas)) {
      return InvalidArgumentError(where + "GPU " + std::to_string(i) +
                                  " is in timeslice mode with replicas " +
                                  std::to_string(g.replicas) + "; replicas must be in " +
                                  std::to_string(kMinTimesliceReplicas) + ".." +
                                  std::to_string(kMaxTimesliceReplicas));
    }
    if (g.mode != SharingMode::kTimeslice && g.replicas != 0) {
      return InvalidArgumentError(where + "GPU " + std::to_string(i) + " is in " +
                                  std::string(SharingModeName(g.mode)) +
                                  " mode; replicas are for timeslice GPUs only");
    }
  }
  return Status::Ok();
}

NodeSpec MakeUniformNode(std::string name, MilliCpu cpu, MiB memory, GpuModelId model,
                         int gpu_count, SharingMode mode, int numa_nodes, bool nvlink) {
  NodeSpec spec;
  spec.name = std::move(name);
  spec.cpu = cpu;
  spec.memory = memory;
  spec.numa_nodes = std::max(1, numa_nodes);
  for (int i = 0; i < gpu_count; ++i) {
    GpuSpec g;
    g.model = model;
    g.mode = mode;
    g.numa_node = gpu_count == 0 ? 0 : i * spec.numa_nodes / gpu_count;
    g.nvlink_domain = nvlink ? 0 : -1;
    spec.gpus.push_back(g);
  }
  return spec;
}

}  // namespace tessera
