#include "server/scenarios/fgd_controller_replay.h"

#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <unordered_set>
#include <utility>

#include "api/job_codec.h"
#include "server/scenarios/controller_job_runner.h"
#include "base/clock.h"
#include "base/rng.h"
#include "server/controller.h"
#include "server/services/job_actions.h"
#include "sim/fgd_experiment.h"
#include "state/cluster_state.h"
#include "store/store.h"

namespace tessera {
namespace {

constexpr Micros kEpoch = 1'000'000'000'000;  // the controller reads 0 as "never"

// One queue whose quota no pod list reaches: placement alone decides.
constexpr const char* kQueuesYaml = R"(queues:
  - name: pods
    quota:
      gpu: 1000000
)";

// Which submitted jobs the controller started (told under its lock, in the cycle).
class StartListener final : public LifecycleListener {
 public:
  void OnJobEvent(const JobRecord& job, const LifecycleEvent& event) override {
    if (event.kind == LifecycleEvent::Kind::kStarted) {
      started_.insert(job.id.value());
    }
  }
  bool Started(uint64_t slot) const { return started_.count(slot) > 0; }
  size_t started() const { return started_.size(); }

 private:
  std::unordered_set<uint64_t> started_;
};

// The experiment's binning (fgd_experiment.cc): the mean of a bin's samples, else of
// bins k-1..k+1.
double BinMean(const std::vector<double>& sum, const std::vector<int64_t>& count, int k) {
  double s = sum[k];
  int64_t c = count[k];
  if (c == 0) {
    for (int j = std::max(0, k - 1); j <= k + 1; ++j) {
      s += sum[j];
      c += count[j];
    }
  }
  return c == 0 ? std::numeric_limits<double>::quiet_NaN() : s / static_cast<double>(c);
}

}  // namespace

StatusOr<FgdLiveReplayResult> ReplayFgdThroughController(const FgdLiveReplaySpec& spec,
                                                         const GpuCatalog& catalog) {
  if (spec.nodes == nullptr || spec.pods == nullptr) {
    return InvalidArgumentError("the replay needs nodes and a pod list");
  }
  TESSERA_ASSIGN_OR_RETURN(ClusterState empty, ClusterState::Create(*spec.nodes, catalog));
  const int64_t capacity = empty.total_gpu_milli().value();
  const int64_t gpus = empty.total_gpus();
  if (capacity == 0) {
    return InvalidArgumentError("the cluster has no GPUs");
  }
  // The experiment's pods for this seed, in its order.
  Pcg32 rng(spec.seed);
  std::vector<TaskRequest> workload =
      PrepareWorkload(*spec.pods, capacity, spec.tune_ratio, rng);

  std::string dir = (std::filesystem::temp_directory_path() / "tessera-fgd-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    return InternalError("cannot make a scratch directory for the controller");
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};

  ManualClock clock(kEpoch);
  InMemoryStore store;
  StartListener listener;
  ControllerOptions o;
  o.data_dir = dir;
  o.placement = spec.placement;
  o.seed = spec.seed;
  o.node_timeout = 1'000'000LL * 1'000'000;  // the agents never fall silent
  o.lifecycle_listener = &listener;
  o.cycle_on_exit = false;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Controller> controller,
                           Controller::Open(o, &store, catalog, clock, kQueuesYaml));
  for (const NodeSpec& n : *spec.nodes) {
    TESSERA_RETURN_IF_ERROR(controller->Register(FakeAgentRegistration(n), "127.0.0.1").status());
  }

  const Principal admin{Role::kAdmin, "", "replay"};
  FgdLiveReplayResult result;
  std::vector<double> alloc_sum(kArrivedBins + 2, 0);
  std::vector<int64_t> count(kArrivedBins + 2, 0);
  int64_t arrived = 0;
  int64_t allocated = 0;
  const auto wall_start = std::chrono::steady_clock::now();
  for (const TaskRequest& request : workload) {
    const int64_t milli = request.gpu_milli.value() * request.gpu_count;
    arrived += milli;
    ++result.pods_tried;
    JobSubmission job;
    job.spec.name = "pod-" + std::to_string(result.pods_tried);
    job.spec.queue = "pods";
    job.spec.tasks = {request};
    job.command = {"true"};
    TESSERA_ASSIGN_OR_RETURN(JobIntake::Submitted made,
                             controller->intake().Submit(admin, std::move(job), ""));
    const uint64_t id = made.jobs.front().value();
    const size_t before = listener.started();
    TESSERA_RETURN_IF_ERROR(controller->RunCycle());
    if (listener.started() > before) {
      ++result.pods_placed;
      allocated += milli;
    } else {
      TESSERA_RETURN_IF_ERROR(JobActions(*controller).Cancel(admin, JobNumber(id)).status());
    }
    // The experiment's sample and bin, with its rounding.
    const double alloc_pct = RoundHalfEven(
        static_cast<double>(allocated) / static_cast<double>(gpus) / 10.0, 2);
    const auto bin = static_cast<int64_t>(RoundHalfEven(
        static_cast<double>(arrived) / static_cast<double>(gpus) / 10.0, 0));
    if (bin >= 0 && bin <= kArrivedBins) {
      alloc_sum[bin] += alloc_pct;
      ++count[bin];
    }
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (std::vector<std::string> broken = controller->CheckInvariants(); !broken.empty()) {
    return InternalError("the controller's invariants broke: " + broken.front());
  }
  const double at_100 = BinMean(alloc_sum, count, 100);
  if (std::isnan(at_100)) {
    return FailedPreconditionError("trace '" + spec.pods->trace +
                                   "' never reaches 100% of GPU capacity; raise the tune ratio");
  }
  result.unallocated_at_100 = 100.0 - RoundHalfEven(at_100, 2);
  return result;
}

}  // namespace tessera
