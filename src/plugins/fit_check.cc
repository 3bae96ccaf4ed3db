#include "plugins/fit_check.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "plugins/fit_filters.h"
#include "sched/gpu_selection.h"

namespace tessera {
namespace {

std::string Gib(int64_t mib) {
  if (mib % 1024 == 0) {
    return std::to_string(mib / 1024) + " GiB";
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(mib) / 1024.0);
  return text;
}

std::string Cpus(int64_t milli) {
  if (milli % 1000 == 0) {
    return std::to_string(milli / 1000);
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(milli) / 1000.0);
  return text;
}

std::string Plural(int64_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// The mode and model part of GpuFitFilter's "could this GPU ever serve the task",
// without the memory test (reported on its own).
bool ModeServes(const GpuSpec& gpu, const GpuModel& model, const TaskRequest& t) {
  if (!t.models.Allows(gpu.model)) {
    return false;
  }
  if (t.wants_mig()) {
    return gpu.mode == SharingMode::kMig && model.FindMigProfile(t.mig_profile).has_value();
  }
  if (gpu.mode == SharingMode::kMig) {
    return false;
  }
  return t.gpu_milli == kWholeGpu ? gpu.mode != SharingMode::kTimeslice : TakesShares(gpu.mode);
}

bool Serves(const GpuSpec& gpu, const GpuModel& model, const TaskRequest& t) {
  return ModeServes(gpu, model, t) &&
         (t.wants_mig() || t.gpu_memory.value() == 0 || t.gpu_memory <= model.memory);
}

// The label whose value groups nodes for a hard topology scope.
std::string ScopeLabel(TopologyScope scope) {
  return scope == TopologyScope::kNvlinkDomain ? "nvlink-domain"
                                               : std::string(TopologyScopeName(scope));
}

std::string ScopeWords(TopologyScope scope) {
  return scope == TopologyScope::kNvlinkDomain ? "NVLink domain"
                                               : std::string(TopologyScopeName(scope));
}

std::string JoinNames(const std::vector<std::string>& names, size_t most = 3) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) {
    out += (i == 0 ? "" : ", ") + names[i];
  }
  if (names.size() > most) {
    out += " and " + std::to_string(names.size() - most) + " more";
  }
  return out;
}

}  // namespace

struct FitChecker::GroupCache {
  static constexpr size_t kScopes = static_cast<size_t>(TopologyScope::kBlock) + 1;
  std::once_flag once[kScopes];
  Grouping by[kScopes];
};

std::shared_ptr<const std::vector<std::unique_ptr<FilterPlugin>>> FitChecker::StandardFilters() {
  auto filters = std::make_shared<std::vector<std::unique_ptr<FilterPlugin>>>();
  filters->push_back(std::make_unique<ResourceFitFilter>());
  filters->push_back(std::make_unique<GpuFitFilter>());
  filters->push_back(std::make_unique<GpuLocalityFilter>());
  return filters;
}

FitChecker::FitChecker(const ClusterState& live, Copy copy,
                       std::shared_ptr<const std::vector<std::unique_ptr<FilterPlugin>>> filters)
    : filters_(filters != nullptr ? std::move(filters) : StandardFilters()),
      groups_(std::make_unique<GroupCache>()) {
  if (copy == Copy::kAsIs) {
    node_count_ = live.present_count();
    empty_ = std::make_unique<ClusterState>(live);
    for (size_t i = 0; i < live.node_count(); ++i) {
      const NodeId id(static_cast<uint32_t>(i));
      if (live.present(id) && !live.node(id).drained()) {
        schedulable_.push_back(id);
      }
    }
    return;
  }
  std::vector<NodeSpec> specs;
  std::vector<NodeId> live_ids;
  for (size_t i = 0; i < live.node_count(); ++i) {
    const NodeId id(static_cast<uint32_t>(i));
    if (live.present(id)) {
      specs.push_back(live.spec(id));
      live_ids.push_back(id);
    }
  }
  node_count_ = specs.size();
  if (specs.empty()) {
    return;
  }
  StatusOr<ClusterState> empty = ClusterState::Create(std::move(specs), live.catalog());
  if (!empty.ok()) {
    node_count_ = 0;  // cannot happen for a live state's specs; then nothing is refused
    return;
  }
  empty_ = std::make_unique<ClusterState>(std::move(empty).value());
  for (size_t i = 0; i < live_ids.size(); ++i) {
    const NodeId id(static_cast<uint32_t>(i));
    const NodeLedger& from = live.node(live_ids[i]);
    (void)empty_->SetNodeDrained(id, from.drained());
    for (int g = 0; g < from.gpu_count(); ++g) {
      if (from.gpus()[static_cast<size_t>(g)].drained()) {
        (void)empty_->SetGpuDrained(id, g, true);
      }
    }
    if (!from.drained()) {
      schedulable_.push_back(id);
    }
  }
}

FitChecker::FitChecker(FitChecker&&) noexcept = default;
FitChecker& FitChecker::operator=(FitChecker&&) noexcept = default;
FitChecker::~FitChecker() = default;

FilterResult FitChecker::Filter(const NodeLedger& node, const TaskRequest& task) const {
  for (const auto& f : *filters_) {
    if (FilterResult r = f->Filter(node, task); !r.fits()) {
      return r;
    }
  }
  return FilterResult::Fits();
}

bool FitChecker::Passes(const NodeLedger& node, const TaskRequest& task) const {
  if (node.drained()) {
    return false;
  }
  for (const auto& f : *filters_) {
    // On an empty node "not now" can only come from a drained GPU: as good as never.
    if (!f->Filter(node, task).fits()) {
      return false;
    }
  }
  return true;
}

std::string FitChecker::DrainNote(const TaskRequest& task) const {
  int64_t count = 0;
  std::vector<std::string> where;
  for (size_t i = 0; i < empty_->node_count(); ++i) {
    const NodeLedger& node = empty_->node(NodeId(static_cast<uint32_t>(i)));
    int here = 0;
    for (size_t g = 0; g < node.gpus().size(); ++g) {
      const GpuLedger& gpu = node.gpus()[g];
      const bool serves = task.cpu_only() || Serves(node.spec().gpus[g], gpu.model(), task);
      if (serves && (node.drained() || gpu.drained())) {
        ++here;
      }
    }
    if (task.cpu_only() && node.drained()) {
      here = 1;
    }
    if (here > 0) {
      count += here;
      where.push_back(node.spec().name);
    }
  }
  if (count == 0) {
    return "";
  }
  if (task.cpu_only()) {
    return " (" + Plural(count, "node") + " drained: " + JoinNames(where) + ")";
  }
  return " (" + std::to_string(count) + " drained on " + (where.size() == 1 ? "node " : "nodes ") +
         JoinNames(where) + ")";
}

std::string FitChecker::TaskNeverFits(const TaskRequest& t) const {
  int64_t max_cpu = 0, max_memory = 0;
  for (NodeId id : schedulable_) {
    const NodeLedger& node = empty_->node(id);
    if (Passes(node, t)) {
      return "";
    }
    max_cpu = std::max(max_cpu, node.spec().cpu.value());
    max_memory = std::max(max_memory, node.spec().memory.value());
  }
  if (t.cpu.value() > max_cpu) {
    return "never fits: a task asks " + Cpus(t.cpu.value()) +
           " CPUs; the largest schedulable node has " + Cpus(max_cpu);
  }
  if (t.memory.value() > max_memory) {
    return "never fits: a task asks " + Gib(t.memory.value()) +
           " of memory; the largest schedulable node has " + Gib(max_memory);
  }
  if (!t.cpu_only()) {
    const GpuCatalog& catalog = empty_->catalog();
    // What the schedulable GPUs offer, step by step: model, mode, memory, count.
    bool model_present = false, mode_present = false, profile_known = false;
    int64_t best_memory = -1;
    std::string best_model;
    int most_on_node = 0;
    std::vector<std::string> models_here;
    for (NodeId id : schedulable_) {
      const NodeLedger& node = empty_->node(id);
      int here = 0;
      for (size_t g = 0; g < node.gpus().size(); ++g) {
        const GpuSpec& spec = node.spec().gpus[g];
        const GpuModel& model = catalog.Get(spec.model);
        if (std::find(models_here.begin(), models_here.end(), model.name) == models_here.end()) {
          models_here.push_back(model.name);
        }
        if (!t.models.Allows(spec.model)) {
          continue;
        }
        model_present = true;
        profile_known |= t.wants_mig() && model.FindMigProfile(t.mig_profile).has_value();
        if (!ModeServes(spec, model, t)) {
          continue;
        }
        mode_present = true;
        if (model.memory.value() > best_memory) {
          best_memory = model.memory.value();
          best_model = model.name;
        }
        here += Serves(spec, model, t) && !node.gpus()[g].drained() ? 1 : 0;
      }
      most_on_node = std::max(most_on_node, here);
    }
    if (!model_present) {
      std::string asked;
      for (const GpuModel& m : catalog.models()) {
        if (t.models.Contains(m.id)) {
          asked += (asked.empty() ? "" : " or ") + m.name;
        }
      }
      return "never fits: a task asks for GPU model " + asked +
             "; no schedulable node has one (models here: " + JoinNames(models_here, 8) + ")";
    }
    if (t.wants_mig() && !profile_known) {
      return "never fits: MIG profile " + t.mig_profile +
             " is not in the geometry of any GPU model here (" + JoinNames(models_here, 8) + ")";
    }
    if (!mode_present) {
      const std::string mode = t.wants_mig()    ? "in MIG mode with profile " + t.mig_profile
                               : t.fractional() ? std::string("in shared or timeslice mode")
                                                : std::string("in exclusive or shared mode");
      return "never fits: a task needs a GPU " + mode +
             (t.models.empty() ? "" : " of the models asked") + "; no schedulable GPU is";
    }
    if (!t.wants_mig() && t.gpu_memory.value() > 0 && t.gpu_memory.value() > best_memory) {
      return "never fits: a task asks " + Gib(t.gpu_memory.value()) +
             " of GPU memory per GPU; the largest GPU has " + Gib(best_memory) + " (" + best_model +
             ")";
    }
    if (most_on_node < t.gpu_count) {
      return "never fits: a task asks " + Plural(t.gpu_count, "GPU") +
             " on one node; a schedulable node has at most " + std::to_string(most_on_node) +
             (t.models.empty() ? "" : " of the models asked") + DrainNote(t);
    }
    if (t.topology == GpuTopology::kRequireLocal && t.gpu_count > 1) {
      return "never fits: a task needs its " + Plural(t.gpu_count, "GPU") +
             " in one NVLink domain or NUMA node (require-local); no schedulable node has that "
             "many together" +
             DrainNote(t);
    }
  }
  // No one resource is short everywhere: each node lacks something else.
  std::map<std::string, int> tally;
  for (NodeId id : schedulable_) {
    for (const auto& f : *filters_) {
      FilterResult r = f->Filter(empty_->node(id), t);
      if (!r.fits()) {
        ++tally[std::string(r.reason)];
        break;
      }
    }
  }
  std::string why;
  for (const auto& [reason, n] : tally) {
    why += (why.empty() ? "" : "; ") + reason + " on " + Plural(n, "node");
  }
  return "never fits: no schedulable node can hold a task even when empty (" + why + ")";
}

size_t FitChecker::PlaceGang(const std::vector<const TaskRequest*>& order,
                             std::span<const NodeId> nodes) const {
  // Copies of the nodes tasks went to, made on first use: a group costs its own nodes,
  // not a copy of the cluster.
  std::vector<std::optional<NodeLedger>> work(nodes.size());
  Pcg32 rng(0);  // first fit: SelectGpus draws nothing
  size_t placed = 0;
  size_t from = 0;  // equal tasks resume where the last one went (earlier nodes are full)
  for (size_t k = 0; k < order.size(); ++k) {
    const TaskRequest& t = *order[k];
    if (k == 0 || !(t == *order[k - 1])) {
      from = 0;
    }
    bool done = false;
    for (; from < nodes.size() && !done; ++from) {
      const NodeLedger& node = work[from] ? *work[from] : empty_->node(nodes[from]);
      if (!Passes(node, t)) {
        continue;
      }
      std::optional<GpuChoice> choice;
      if (!t.cpu_only()) {
        choice = SelectGpus(node, t, GpuSelection::kFirstFit, rng);
        if (!choice) {
          continue;
        }
      }
      StatusOr<Allocation> a = MakeAllocation(nodes[from], node, t, choice.value_or(GpuChoice{}));
      if (!a.ok()) {
        continue;
      }
      if (!work[from]) {
        work[from].emplace(empty_->node(nodes[from]));
      }
      if (work[from]->Allocate(a.value()).ok()) {
        done = true;
        break;
      }
    }
    if (!done) {
      return placed;
    }
    ++placed;
  }
  return placed;
}

FitChecker::Prefix FitChecker::PrefixOf(const std::vector<const TaskRequest*>& order) {
  Prefix p;
  int64_t cpu = 0, memory = 0, gpu = 0;
  for (const TaskRequest* t : order) {
    cpu += t->cpu.value();
    memory += t->memory.value();
    // A MIG instance is sized by its profile, not milli: counted as nothing here.
    gpu += t->wants_mig() ? 0 : t->gpu_count * t->gpu_milli.value();
    p.cpu.push_back(cpu);
    p.memory.push_back(memory);
    p.gpu_milli.push_back(gpu);
  }
  return p;
}

size_t FitChecker::RoomBound(const Prefix& prefix, std::span<const NodeId> nodes) const {
  int64_t cpu = 0, memory = 0, gpu = 0;
  for (NodeId id : nodes) {
    const NodeLedger& node = empty_->node(id);
    cpu += node.free_cpu().value();
    memory += node.free_memory().value();
    gpu += node.free_gpu_milli().value();
  }
  auto within = [](const std::vector<int64_t>& sums, int64_t room) {
    return static_cast<size_t>(std::upper_bound(sums.begin(), sums.end(), room) - sums.begin());
  };
  return std::min({within(prefix.cpu, cpu), within(prefix.memory, memory),
                   within(prefix.gpu_milli, gpu)});
}

std::vector<const TaskRequest*> FitChecker::Order(const JobSpec& spec) {
  std::vector<const TaskRequest*> order;
  for (const TaskRequest& t : spec.tasks) {
    order.push_back(&t);
  }
  auto size = [](const TaskRequest* t) {
    return std::make_tuple(t->gpu_count, t->gpu_milli.value(), t->gpu_memory.value(),
                           t->cpu.value(), t->memory.value());
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto* a, const auto* b) { return size(a) > size(b); });
  return order;
}

std::vector<std::span<const NodeId>> FitChecker::Groups(const JobSpec& spec) const {
  if (spec.tasks.size() <= 1 || !spec.topology.hard || spec.topology.scope == TopologyScope::kAny) {
    return {std::span<const NodeId>(schedulable_)};
  }
  const Grouping& g = GroupsFor(spec.topology.scope);
  std::vector<std::span<const NodeId>> groups;
  groups.reserve(g.starts.size());
  for (size_t k = 0; k + 1 < g.starts.size(); ++k) {
    groups.emplace_back(g.nodes.data() + g.starts[k], g.starts[k + 1] - g.starts[k]);
  }
  return groups;
}

const FitChecker::Grouping& FitChecker::GroupsFor(TopologyScope scope) const {
  const size_t k = static_cast<size_t>(scope);
  std::call_once(groups_->once[k], [&] {
    // Nodes sharing the scope's label (nodes without it are groups of their own), as
    // JobScheduler::PlaceGang groups them; groups in order of their first node.
    std::vector<size_t> of(schedulable_.size());
    size_t count = 0;
    if (scope == TopologyScope::kNode) {
      for (size_t i = 0; i < of.size(); ++i) {
        of[i] = count++;
      }
    } else {
      const std::string key = ScopeLabel(scope);
      std::unordered_map<std::string_view, size_t> index;
      for (size_t i = 0; i < of.size(); ++i) {
        const std::string_view value = empty_->spec(schedulable_[i]).Label(key);
        if (value.empty()) {
          of[i] = count++;
          continue;
        }
        of[i] = index.try_emplace(value, count).first->second;
        count += of[i] == count ? 1 : 0;
      }
    }
    // A stable counting sort by group.
    Grouping& g = groups_->by[k];
    g.starts.assign(count + 1, 0);
    for (size_t group : of) {
      ++g.starts[group + 1];
    }
    for (size_t i = 0; i < count; ++i) {
      g.starts[i + 1] += g.starts[i];
    }
    g.nodes.resize(schedulable_.size());
    std::vector<size_t> next(g.starts.begin(), g.starts.end() - 1);
    for (size_t i = 0; i < of.size(); ++i) {
      g.nodes[next[of[i]]++] = schedulable_[i];
    }
  });
  return groups_->by[k];
}

bool FitChecker::GangPlaces(const JobSpec& spec) const {
  if (empty_ == nullptr) {
    return false;
  }
  if (spec.tasks.size() == 1) {  // one task: the filters alone, without a copy to place on
    return std::any_of(schedulable_.begin(), schedulable_.end(),
                       [&](NodeId id) { return Passes(empty_->node(id), spec.tasks[0]); });
  }
  const std::vector<const TaskRequest*> order = Order(spec);
  const Prefix prefix = PrefixOf(order);
  for (std::span<const NodeId> group : Groups(spec)) {
    if (RoomBound(prefix, group) == order.size() && PlaceGang(order, group) == order.size()) {
      return true;
    }
  }
  return false;
}

FitVerdict FitChecker::Check(const JobSpec& spec) const {
  if (empty_ == nullptr) {
    return {false, "no node is up", true};
  }
  std::vector<const TaskRequest*> distinct;
  for (const TaskRequest& t : spec.tasks) {
    if (std::none_of(distinct.begin(), distinct.end(), [&](const auto* d) { return *d == t; })) {
      distinct.push_back(&t);
    }
  }
  if (schedulable_.empty()) {
    return {false, "held by a drain: every node is drained" + DrainNote(TaskRequest{}), true};
  }
  for (const TaskRequest* t : distinct) {
    if (std::string never = TaskNeverFits(*t); !never.empty()) {
      return {false, std::move(never)};
    }
  }
  if (spec.tasks.size() <= 1) {
    return {};
  }
  const std::vector<const TaskRequest*> order = Order(spec);
  const size_t n = order.size();
  int64_t gpus = 0, cpu = 0, memory = 0;
  for (const TaskRequest& t : spec.tasks) {
    gpus += t.gpu_count;
    cpu += t.cpu.value();
    memory += t.memory.value();
  }
  const bool scoped = spec.topology.hard && spec.topology.scope != TopologyScope::kAny;
  if (!scoped) {
    const size_t placed = PlaceGang(order, schedulable_);
    if (placed == n) {
      return {};
    }
    // Name the resource the schedulable nodes lack in total, else the packing.
    int64_t have_gpus = 0, have_cpu = 0, have_memory = 0;
    const bool whole = std::all_of(spec.tasks.begin(), spec.tasks.end(),
                                   [](const auto& t) { return t.cpu_only() || t.whole_gpus(); });
    for (NodeId id : schedulable_) {
      const NodeLedger& node = empty_->node(id);
      have_cpu += node.spec().cpu.value();
      have_memory += node.spec().memory.value();
      for (size_t g = 0; g < node.gpus().size(); ++g) {
        const GpuLedger& gpu = node.gpus()[g];
        have_gpus += !gpu.drained() && Serves(node.spec().gpus[g], gpu.model(), *order[0]) ? 1 : 0;
      }
    }
    if (whole && distinct.size() == 1 && gpus > have_gpus) {
      return {false, "never fits: the job needs " + Plural(gpus, "GPU") + "; " +
                         std::to_string(have_gpus) + (have_gpus == 1 ? " is" : " are") +
                         " schedulable" + DrainNote(*order[0])};
    }
    if (cpu > have_cpu) {
      return {false, "never fits: the job needs " + Cpus(cpu) +
                         " CPUs; the schedulable nodes have " + Cpus(have_cpu) +
                         DrainNote(TaskRequest{})};
    }
    if (memory > have_memory) {
      return {false, "never fits: the job needs " + Gib(memory) +
                         " of memory; the schedulable nodes have " + Gib(have_memory) +
                         DrainNote(TaskRequest{})};
    }
    return {false, "never fits: the job's " + std::to_string(n) +
                       " tasks do not fit together on the schedulable nodes even when empty (at "
                       "most " +
                       std::to_string(placed) + " do)" + DrainNote(*order[0])};
  }
  const Prefix prefix = PrefixOf(order);
  size_t best = 0;
  for (std::span<const NodeId> group : Groups(spec)) {
    // A group whose free room holds neither the gang nor more of it than another
    // group took cannot change the answer: skip placing there.
    if (const size_t bound = RoomBound(prefix, group); bound < n && bound <= best) {
      continue;
    }
    const size_t placed = PlaceGang(order, group);
    if (placed == n) {
      return {};
    }
    best = std::max(best, placed);
  }
  const std::string where = ScopeWords(spec.topology.scope);
  std::string need = Plural(static_cast<int64_t>(n), "task");
  if (gpus > 0) {
    need += ", " + Plural(gpus, "GPU");
  }
  return {false, "never fits: the job needs its " + need + " in one " + where +
                     " (hard topology); no " + where + " can hold them even when empty (at most " +
                     std::to_string(best) + " of the tasks)" + DrainNote(*order[0])};
}

}  // namespace tessera
