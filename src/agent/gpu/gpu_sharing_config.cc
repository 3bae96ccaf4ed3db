#include "agent/gpu/gpu_sharing_config.h"

#include <algorithm>

namespace tessera {
namespace {

constexpr int kMaxGpuIndex = 63;

// Spaces and tabs only: a line break in a flag's value is an error, not padding.
std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

Status BadSharingItem(std::string_view item, const std::string& why) {
  return InvalidArgumentError("--gpu-sharing item '" + std::string(item) + "': " + why);
}

// A GPU index 0..63, or -1.
int ParseIndex(std::string_view s) {
  s = TrimBlanks(s);
  if (s.empty() || s.size() > 2) {
    return -1;
  }
  int n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') {
      return -1;
    }
    n = n * 10 + (c - '0');
  }
  return n <= kMaxGpuIndex ? n : -1;
}

std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) {
      return out;
    }
    start = at + 1;
  }
}

StatusOr<GpuSharingItem> ParseItem(std::string_view text) {
  GpuSharingItem item;
  item.text = std::string(text);
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return BadSharingItem(text, "expected GPUS=MODE, e.g. 0,1=shared or all=timeslice:4");
  }
  const std::string_view gpus = TrimBlanks(text.substr(0, eq));
  const std::string_view mode = TrimBlanks(text.substr(eq + 1));
  StatusOr<GpuSharing> sharing = ParseGpuSharing(mode);
  if (!sharing.ok()) {
    return BadSharingItem(text, sharing.status().message() +
                                    " (modes: exclusive, shared, timeslice:N with N in 2..64)");
  }
  if (sharing->mode == SharingMode::kMig) {
    return BadSharingItem(text,
                          "MIG mode follows the driver (nvidia-smi -i N -mig 1) and is not set "
                          "here");
  }
  item.sharing = *sharing;
  if (gpus == "all") {
    item.all = true;
    return item;
  }
  for (std::string_view part : SplitOn(gpus, ',')) {
    const size_t dash = part.find('-');
    const int first = ParseIndex(part.substr(0, dash));
    const int last = dash == std::string_view::npos ? first : ParseIndex(part.substr(dash + 1));
    if (first < 0 || last < 0 || last < first) {
      return BadSharingItem(text,
                            "'" + std::string(TrimBlanks(part)) +
                                "' is not a GPU index or range (0..63, e.g. 2 or 0-3) or all");
    }
    for (int g = first; g <= last; ++g) {
      item.gpus.push_back(g);
    }
  }
  std::sort(item.gpus.begin(), item.gpus.end());
  item.gpus.erase(std::unique(item.gpus.begin(), item.gpus.end()), item.gpus.end());
  return item;
}

}  // namespace

StatusOr<GpuSharingConfig> ParseGpuSharingConfig(std::string_view spec) {
  GpuSharingConfig config;
  if (TrimBlanks(spec).empty()) {
    return config;
  }
  for (std::string_view raw : SplitOn(spec, ';')) {
    const std::string_view text = TrimBlanks(raw);
    if (text.empty()) {
      return InvalidArgumentError("--gpu-sharing '" + std::string(spec) + "' has an empty item");
    }
    TESSERA_ASSIGN_OR_RETURN(GpuSharingItem item, ParseItem(text));
    config.items.push_back(std::move(item));
  }
  return config;
}

std::vector<std::string> ApplyGpuSharingConfig(const GpuSharingConfig& config,
                                               std::vector<DiscoveredGpu>* gpus) {
  std::vector<std::string> problems;
  auto in_mig = [](const DiscoveredGpu& g) { return g.mig_enabled || g.mode == SharingMode::kMig; };
  for (const GpuSharingItem& item : config.items) {
    auto set = [&](DiscoveredGpu& g) {
      g.mode = item.sharing.mode;
      g.replicas = item.sharing.replicas;
    };
    if (item.all) {
      for (DiscoveredGpu& g : *gpus) {
        if (!in_mig(g)) {
          set(g);
        }
      }
      continue;
    }
    for (int index : item.gpus) {
      auto it = std::find_if(gpus->begin(), gpus->end(),
                             [&](const DiscoveredGpu& g) { return g.index == index; });
      if (it == gpus->end()) {
        problems.push_back("--gpu-sharing item '" + item.text + "': GPU " + std::to_string(index) +
                           " is out of range (this node has " + std::to_string(gpus->size()) +
                           " GPUs)");
      } else if (in_mig(*it)) {
        problems.push_back(
            "--gpu-sharing item '" + item.text + "': GPU " + std::to_string(index) +
            " is in MIG mode; " +
            (item.sharing.mode == SharingMode::kExclusive
                 ? std::string("it cannot be handed out whole")
                 : std::string("MPS and time-slicing are not available on MIG instances")) +
            "; disable MIG on it first");
      } else {
        set(*it);
      }
    }
  }
  return problems;
}

}  // namespace tessera
