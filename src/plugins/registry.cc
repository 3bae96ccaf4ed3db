#include "plugins/registry.h"

#include <algorithm>

#include "base/strings.h"
#include "plugins/fit_filters.h"
#include "plugins/tessera_scorer.h"

namespace tessera {

NodeScale ScaleOf(const ClusterState& state) {
  NodeScale scale{1, 1};
  for (const NodeLedger& n : state.nodes()) {
    scale.max_cpu_milli = std::max(scale.max_cpu_milli, n.spec().cpu.value());
    scale.max_gpu_milli = std::max<int64_t>(scale.max_gpu_milli, n.gpu_count() * kMilliPerGpu);
    for (const GpuLedger& g : n.gpus()) {
      ++scale.model_gpus[g.model().id.value() % GpuModelSet::kMaxModels];
    }
  }
  return scale;
}

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames{"random",  "dotprod", "gpuclustering", "gpupacking",
                                               "bestfit", "fgd",     "tessera"};
  return kNames;
}

StatusOr<Profile> MakeProfile(std::string_view policy, const PolicyContext& context) {
  Profile p;
  p.name = std::string(policy);
  p.filters.push_back(std::make_unique<ResourceFitFilter>());
  p.filters.push_back(std::make_unique<GpuFitFilter>());
  p.filters.push_back(std::make_unique<GpuLocalityFilter>());
  auto add = [&p](std::unique_ptr<ScorePlugin> plugin) {
    p.scorers.push_back({std::move(plugin), 1});
  };
  auto need_fragmentation = [&]() -> Status {
    if (context.fragmentation == nullptr) {
      return InvalidArgumentError("policy '" + std::string(policy) +
                                  "' needs the workload's typical tasks");
    }
    return Status::Ok();
  };
  if (policy == "random") {
    add(std::make_unique<RandomScorer>());
    p.gpu_selection = GpuSelection::kRandom;
    p.tie_break = TieBreak::kRandom;
  } else if (policy == "bestfit") {
    add(std::make_unique<BestFitScorer>(context.scale));
  } else if (policy == "dotprod") {
    add(std::make_unique<DotProductScorer>(context.scale));
  } else if (policy == "gpupacking") {
    add(std::make_unique<GpuPackingScorer>());
  } else if (policy == "gpuclustering") {
    add(std::make_unique<GpuClusteringScorer>(context.scale));
  } else if (policy == "fgd") {
    TESSERA_RETURN_IF_ERROR(need_fragmentation());
    add(std::make_unique<FgdScorer>(context.fragmentation));
  } else if (policy == "tessera") {
    TESSERA_RETURN_IF_ERROR(need_fragmentation());
    add(std::make_unique<TesseraScorer>(context.fragmentation, context.scale.model_gpus));
    // Locality outranks any fragmentation difference (the Tessera score stays below
    // 2000), so a multi-GPU task lands where its GPUs can be close, where possible.
    p.scorers.push_back({std::make_unique<GpuLocalityScorer>(), 2000});
  } else {
    return InvalidArgumentError("unknown policy '" + std::string(policy) +
                                "'; known: " + Join(PolicyNames(), ", "));
  }
  return p;
}

bool PlacementNeedsWorkload(std::string_view policy) {
  return policy == "fgd" || policy == "tessera";
}

StatusOr<Profile> MakeLearnedProfile(std::string_view policy, NodeScale scale,
                                     const FragmentationModel* typical) {
  if (PlacementNeedsWorkload(policy) && typical == nullptr) {
    return MakeProfile("bestfit", PolicyContext{scale, nullptr});
  }
  return MakeProfile(policy, PolicyContext{scale, typical});
}

}  // namespace tessera
