#include "plugins/baseline_scorers.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tessera {

int64_t RequestGpuMilli(const NodeLedger& node, const TaskRequest& request) {
  if (request.cpu_only()) {
    return 0;
  }
  if (request.wants_mig()) {
    for (const GpuLedger& g : node.gpus()) {
      if (g.mode() != SharingMode::kMig || !request.models.Allows(g.model().id)) {
        continue;
      }
      if (auto p = g.model().FindMigProfile(request.mig_profile)) {
        return g.model().mig_profiles[*p].ChargedMilli().value();
      }
    }
    return 0;
  }
  return request.gpu_milli.value() * request.gpu_count;
}

NodeScore BestFitScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  double cpu_left = static_cast<double>(node.free_cpu().value() - request.cpu.value());
  double gpu_left =
      static_cast<double>(node.free_gpu_milli().value() - RequestGpuMilli(node, request));
  double s = (cpu_left / static_cast<double>(scale_.max_cpu_milli)) * 0.5 +
             (gpu_left / static_cast<double>(scale_.max_gpu_milli)) * 0.5;
  return {static_cast<int64_t>((1.0 - s) * 100), {}};
}

NodeScore DotProductScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  const auto max_cpu = static_cast<double>(scale_.max_cpu_milli);
  const auto max_gpu = static_cast<double>(scale_.max_gpu_milli);
  double node_cpu = static_cast<double>(node.free_cpu().value()) / max_cpu;
  double node_gpu = static_cast<double>(node.free_gpu_milli().value()) / max_gpu;
  double pod_cpu = static_cast<double>(request.cpu.value()) / max_cpu;
  double pod_gpu = static_cast<double>(RequestGpuMilli(node, request)) / max_gpu;
  double d = (node_cpu * pod_cpu + node_gpu * pod_gpu) / 2;
  return {static_cast<int64_t>(100 * (1 - d)), {}};
}

NodeScore GpuPackingScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  if (request.cpu_only()) {
    return {0, {}};
  }
  const auto& gpus = node.gpus();
  const int total = node.gpu_count();
  int fully_free = 0;
  for (const GpuLedger& g : gpus) {
    fully_free += g.free_milli() == kWholeGpu ? 1 : 0;
  }
  if (fully_free == total) {
    return {std::max<int64_t>(33 - fully_free, fully_free), {}};
  }
  const int64_t want = RequestGpuMilli(node, request) / std::max(1, request.gpu_count);
  std::vector<int> order(gpus.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return gpus[a].free_milli() < gpus[b].free_milli(); });
  int picked = 0;
  int picked_whole = 0;
  int64_t percent_sum = 0;
  for (int i : order) {
    if (picked == request.gpu_count) {
      break;
    }
    int64_t left = gpus[i].free_milli().value();
    if (left < want) {
      continue;
    }
    ++picked;
    picked_whole += left == kMilliPerGpu ? 1 : 0;
    percent_sum += left * 100 / kMilliPerGpu;
  }
  if (picked_whole > 0) {
    return {std::max<int64_t>(50 - picked_whole, 33), {}};
  }
  return {std::max<int64_t>(100 - percent_sum / 10, 50), {}};
}

NodeScore GpuClusteringScorer::Score(const NodeLedger& node, const TaskRequest& request) {
  if (request.cpu_only()) {
    return {0, {}};
  }
  int shape = request.wants_mig()             ? kShapeMig
              : request.gpu_milli < kWholeGpu ? kShapeShare
                                              : request.gpu_count;
  int64_t base = 25 * (scale_.max_gpu_milli - node.free_gpu_milli().value()) / scale_.max_gpu_milli;
  if (!node.HasGpuAllocations()) {
    return {base + 25, {}};
  }
  bool same = node.ShapeCount(shape) > 0;
  bool other = false;
  for (int s : {kShapeShare, kShapeMig}) {
    other |= s != shape && node.ShapeCount(s) > 0;
  }
  for (int k = 1; k <= node.gpu_count() && !other; ++k) {
    other |= k != shape && node.ShapeCount(k) > 0;
  }
  if (same && !other) {
    return {base + 75, {}};
  }
  if (same) {
    return {base + 50, {}};
  }
  return {base, {}};
}

}  // namespace tessera
