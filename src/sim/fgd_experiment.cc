#include "sim/fgd_experiment.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string_view>
#include <utility>

#include "plugins/registry.h"
#include "sched/placer.h"

namespace tessera {

double RoundHalfEven(double value, int decimals) {
  // printf rounds the exact binary value, ties to even, which is what Python's
  // round() does; scaling first (value * 100) would round 2.675 up.
  if (decimals == 0) {
    return std::nearbyint(value);  // no scaling, so exact: ties to even
  }
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.*f", decimals, value);
  return std::strtod(buf.data(), nullptr);
}

namespace {

// Our policy names and the authors' labels in their result files.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kAuthorsLabels{{
    {"random", "01-Random"},
    {"dotprod", "02-DotProd"},
    {"gpuclustering", "03-GpuClustering"},
    {"gpupacking", "04-GpuPacking"},
    {"bestfit", "05-BestFit"},
    {"fgd", "06-FGD"},
    {"tessera", "07-Tessera"},
}};

}  // namespace

std::string AuthorsPolicyLabel(const std::string& policy) {
  for (const auto& [ours, label] : kAuthorsLabels) {
    if (ours == policy) {
      return std::string(label);
    }
  }
  return policy;
}

std::string PolicyFromAuthorsLabel(const std::string& label) {
  for (const auto& [ours, theirs] : kAuthorsLabels) {
    if (theirs == label) {
      return std::string(ours);
    }
  }
  return label;
}

std::vector<TaskRequest> PrepareWorkload(const PodList& pods, int64_t total_gpu_milli,
                                         double tune_ratio, Rng& rng) {
  std::vector<const TracePod*> sorted;
  sorted.reserve(pods.pods.size());
  for (const TracePod& p : pods.pods) {
    sorted.push_back(&p);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TracePod* a, const TracePod* b) { return a->name < b->name; });
  std::vector<TaskRequest> order;
  order.reserve(sorted.size() * 2);
  for (const TracePod* p : sorted) {
    order.push_back(p->request);
  }
  rng.Shuffle(std::span<TaskRequest>(order));

  auto gpu_of = [](const TaskRequest& r) { return r.gpu_milli.value() * r.gpu_count; };
  int64_t total = 0;
  for (const TaskRequest& r : order) {
    total += gpu_of(r);
  }
  const auto target = static_cast<int64_t>(tune_ratio * static_cast<double>(total_gpu_milli));
  const bool any_gpu = std::any_of(sorted.begin(), sorted.end(),
                                   [&](const TracePod* p) { return gpu_of(p->request) > 0; });
  if (total < target && any_gpu) {
    // Clone random originals (from the name-sorted list) onto the end. The stop test
    // uses the clone's per-GPU milli, as the authors' simulator does.
    const auto n = static_cast<uint32_t>(sorted.size());
    while (true) {
      const TaskRequest& clone = sorted[rng.Uniform(n)]->request;
      if (total + clone.gpu_milli.value() > target) {
        break;
      }
      total += gpu_of(clone);
      order.push_back(clone);
    }
  } else {
    while (total > target && !order.empty()) {
      size_t idx = rng.Uniform(static_cast<uint32_t>(order.size()));
      total -= gpu_of(order[idx]);
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(idx));
    }
  }
  return order;
}

namespace {

struct BinSums {
  std::vector<double> alloc_sum = std::vector<double>(kArrivedBins + 2, 0);
  std::vector<double> frag_sum = std::vector<double>(kArrivedBins + 2, 0);
  std::vector<double> ratio_sum = std::vector<double>(kArrivedBins + 2, 0);
  std::vector<int64_t> count = std::vector<int64_t>(kArrivedBins + 2, 0);
};

// The authors' merge: the mean of a bin's samples, else of bins k-1..k+1.
std::vector<double> Finish(const std::vector<double>& sums, const std::vector<int64_t>& count) {
  std::vector<double> out(kArrivedBins, std::numeric_limits<double>::quiet_NaN());
  for (int k = 0; k < kArrivedBins; ++k) {
    double s = sums[k];
    int64_t c = count[k];
    if (c == 0) {
      for (int j = std::max(0, k - 1); j <= k + 1; ++j) {
        s += sums[j];
        c += count[j];
      }
    }
    if (c > 0) {
      out[k] = RoundHalfEven(s / static_cast<double>(c), 2);
    }
  }
  return out;
}

}  // namespace

StatusOr<FgdRunResult> RunFgdExperiment(const FgdRunSpec& spec) {
  if (spec.cluster == nullptr || spec.pods == nullptr || spec.typical == nullptr) {
    return InvalidArgumentError("FGD run needs a cluster, a pod list and typical tasks");
  }
  ClusterState state = *spec.cluster;
  PolicyContext context{ScaleOf(state), spec.typical};
  TESSERA_ASSIGN_OR_RETURN(Profile profile, MakeProfile(spec.policy, context));
  Placer placer(std::move(profile), spec.tie_break);

  Pcg32 rng(spec.seed);
  const int64_t capacity = state.total_gpu_milli().value();
  if (capacity == 0) {
    return InvalidArgumentError("the cluster has no GPUs");
  }
  std::vector<TaskRequest> workload = PrepareWorkload(*spec.pods, capacity, spec.tune_ratio, rng);
  if (spec.tie_break == TieBreak::kNodePriority) {
    std::vector<uint32_t> ranks(state.node_count());
    std::iota(ranks.begin(), ranks.end(), 0);
    rng.Shuffle(std::span<uint32_t>(ranks));
    placer.SetNodeRanks(std::move(ranks));
  }

  FgdRunResult result;
  result.trace = spec.pods->trace;
  result.policy = spec.policy;
  result.seed = spec.seed;
  result.total_gpus = state.total_gpus();

  // Fragmentation per node, kept current as nodes change.
  const auto frag_scale = static_cast<double>(spec.typical->scale());
  std::vector<int64_t> node_frag(state.node_count());
  int64_t frag_total = 0;
  for (size_t i = 0; i < state.node_count(); ++i) {
    node_frag[i] = spec.typical->ScaledFrag(state.nodes()[i]);
    frag_total += node_frag[i];
  }

  BinSums bins;
  int64_t arrived = 0;
  auto start = std::chrono::steady_clock::now();
  // One sample per pod; its values change only when a pod is placed, so they are
  // recomputed then (the 2-decimal rounding goes through printf, not cheap).
  const auto cap = static_cast<double>(capacity);
  const auto gpus = static_cast<double>(result.total_gpus);
  struct Sample {
    double alloc_pct = 0;
    double frag_pct = 0;
    double frag_ratio_pct = 0;
  };
  auto sample_now = [&]() {
    // The authors' arithmetic: milli / total_gpus / 10 is a percentage of capacity.
    const auto allocated = static_cast<double>(state.allocated_gpu_milli().value());
    const double frag_milli = static_cast<double>(frag_total) / frag_scale;
    const double idle = cap - allocated;
    return Sample{RoundHalfEven(allocated / gpus / 10.0, 2), frag_milli / cap * 100.0,
                  idle > 0 ? RoundHalfEven(frag_milli / idle * 100.0, 2) : 0.0};
  };
  Sample sample = sample_now();
  for (const TaskRequest& request : workload) {
    arrived += request.gpu_milli.value() * request.gpu_count;
    ++result.pods_tried;
    Placement p = placer.Place(state, request, rng);
    if (p.placed) {
      Status s = state.Allocate(p.allocation);
      if (!s.ok()) {
        return InternalError("placement could not be applied: " + s.ToString());
      }
      ++result.pods_placed;
      size_t i = p.allocation.node.value();
      int64_t f = spec.typical->ScaledFrag(state.nodes()[i]);
      frag_total += f - node_frag[i];
      node_frag[i] = f;
      sample = sample_now();
    } else if (!request.cpu_only()) {
      ++result.gpu_pods_failed;
    }
    const double arrived_pct = RoundHalfEven(static_cast<double>(arrived) / gpus / 10.0, 0);
    const auto bin = static_cast<int64_t>(arrived_pct);
    if (bin < 0 || bin > kArrivedBins) {
      continue;
    }
    bins.alloc_sum[bin] += sample.alloc_pct;
    bins.frag_sum[bin] += sample.frag_pct;
    bins.ratio_sum[bin] += sample.frag_ratio_pct;
    ++bins.count[bin];
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.alloc_pct = Finish(bins.alloc_sum, bins.count);
  result.frag_pct = Finish(bins.frag_sum, bins.count);
  for (double& v : result.frag_pct) {
    v = RoundHalfEven(v, 2);
  }
  result.frag_ratio_pct = Finish(bins.ratio_sum, bins.count);
  if (std::isnan(result.alloc_pct[100])) {
    return FailedPreconditionError("trace '" + result.trace +
                                   "' never reaches 100% of GPU capacity; raise --tune");
  }
  return result;
}

}  // namespace tessera
