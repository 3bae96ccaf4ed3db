// Task launches built from plain inputs (task_launches.h): a gang's ranks, the Slurm
// variables, a share's MPS limits, a MIG grant and the checkpoint directory.
#include "server/task_launches.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "server/job_table.h"

namespace tessera {
namespace task_launches_test {

const GpuCatalog& Catalog() { return GpuCatalog::Default(); }

GpuModelId H100() { return *Catalog().Find("H100-80GB"); }

// A node of 8 H100s over 2 NUMA nodes (GPUs 0-3 on NUMA 0, 4-7 on NUMA 1).
NodeSpec Node(std::string name, SharingMode mode = SharingMode::kExclusive) {
  return MakeUniformNode(std::move(name), MilliCpu(64000), MiB(512 * 1024), H100(), 8, mode,
                         /*numa_nodes=*/2);
}

GpuGrant Whole(int gpu) { return GpuGrant{gpu, kWholeGpu, MiB(0), -1, -1}; }

Allocation On(NodeId node, std::vector<GpuGrant> gpus, int64_t cpu_milli = 2500) {
  return Allocation{node, MilliCpu(cpu_milli), MiB(4096), std::move(gpus), 0};
}

std::string Env(const TaskLaunch& l, const std::string& key) {
  auto it = l.env.find(key);
  return it == l.env.end() ? "<unset>" : it->second;
}

// A 2-node, 3-task gang: tasks 0 and 1 on "a" (GPUs 0 and 5), task 2 on "b" (GPU 2).
class TaskLaunchesGangTest : public ::testing::Test {
 protected:
  TaskLaunchesGangTest() {
    submission_.command = {"python", "train.py"};
    submission_.env = {{"USER_VAR", "kept"}, {"RANK", "overridden"}};
    submission_.working_dir = "/work";
    submission_.submit_dir = "/home/alice";
    allocations_ = {On(NodeId(0), {Whole(0)}), On(NodeId(0), {Whole(5)}),
                    On(NodeId(1), {Whole(2)})};
  }
  LaunchInputs Inputs(int task) const {
    LaunchInputs in;
    in.job_id = 42;
    in.job_name = "train";
    in.attempt = 3;
    in.tenant = "alice";
    in.queue = "research";
    in.submission = &submission_;
    in.task = task;
    in.task_nodes = {"a", "a", "b"};
    in.allocations = allocations_;
    in.node = task < 2 ? &a_ : &b_;
    in.master_address = "10.0.0.1";
    in.checkpoint_dir = "/ckpt/42";
    in.checkpoint_managed = true;
    return in;
  }

  JobSubmission submission_;
  std::vector<Allocation> allocations_;
  NodeSpec a_ = Node("a");
  NodeSpec b_ = Node("b");
};

TEST_F(TaskLaunchesGangTest, EachTaskGetsItsRanksAsTorchrunSetsThem) {
  const std::vector<std::map<std::string, std::string>> want = {
      {{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"NODE_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}},
      {{"RANK", "1"}, {"LOCAL_RANK", "1"}, {"NODE_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}},
      {{"RANK", "2"}, {"LOCAL_RANK", "0"}, {"NODE_RANK", "1"}, {"LOCAL_WORLD_SIZE", "1"}},
  };
  for (int t = 0; t < 3; ++t) {
    SCOPED_TRACE("task " + std::to_string(t));
    const TaskLaunch l = BuildTaskLaunch(Inputs(t), Catalog());
    for (const auto& [key, value] : want[static_cast<size_t>(t)]) {
      EXPECT_EQ(Env(l, key), value) << key;
    }
    EXPECT_EQ(Env(l, "WORLD_SIZE"), "3");
    EXPECT_EQ(Env(l, "MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(Env(l, "MASTER_PORT"), "20042");  // 20000 + job id % 20000
    EXPECT_EQ(l.key, (TaskKey{42, t, 3}));
  }
}

TEST_F(TaskLaunchesGangTest, TheLaunchCarriesTheSubmissionAndTheTasksShare) {
  LaunchInputs in = Inputs(1);
  in.identity = std::make_pair(int64_t{200001}, int64_t{200001});
  in.pty_secret = "s3cret";
  const TaskLaunch l = BuildTaskLaunch(in, Catalog());
  EXPECT_EQ(l.job_name, "train");
  EXPECT_EQ(l.command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(Env(l, "USER_VAR"), "kept");
  EXPECT_EQ(Env(l, "RANK"), "1");  // ours over the submission's
  EXPECT_EQ(l.working_dir, "/work");
  EXPECT_EQ(l.submit_dir, "/home/alice");
  EXPECT_EQ(l.cpu_milli, 2500);
  EXPECT_EQ(l.memory_mib, 4096);
  EXPECT_EQ(l.gpus, std::vector<int>{5});
  EXPECT_TRUE(l.mig.empty());
  EXPECT_EQ(l.gpu_milli, 1000);
  EXPECT_EQ(l.gpu_memory_mib, 0);
  EXPECT_EQ(l.numa_nodes, std::vector<int>{1});  // GPU 5 is on the second NUMA node
  EXPECT_EQ(l.uid, 200001);
  EXPECT_EQ(l.gid, 200001);
  EXPECT_EQ(l.pty_secret, "s3cret");
  EXPECT_EQ(Env(l, "TESSERA_JOB_ID"), "42");
  EXPECT_EQ(Env(l, "TESSERA_JOB_NAME"), "train");
  EXPECT_EQ(Env(l, "TESSERA_TASK_INDEX"), "1");
  EXPECT_EQ(Env(l, "TESSERA_ATTEMPT"), "3");
  EXPECT_EQ(Env(l, "TESSERA_TENANT"), "alice");
  EXPECT_EQ(Env(l, "TESSERA_QUEUE"), "research");
  // A whole card: no share limits.
  EXPECT_EQ(Env(l, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "<unset>");
  EXPECT_EQ(Env(l, "TESSERA_GPU_SHARING"), "<unset>");
}

TEST_F(TaskLaunchesGangTest, WithoutAnIdentityOrMasterAddressTheDefaultsHold) {
  LaunchInputs in = Inputs(0);
  in.master_address.clear();
  const TaskLaunch l = BuildTaskLaunch(in, Catalog());
  EXPECT_EQ(Env(l, "MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(l.uid, -1);
  EXPECT_EQ(l.gid, -1);
  EXPECT_EQ(l.pty_secret, "");
}

TEST_F(TaskLaunchesGangTest, SlurmVariablesDescribeTheGangAndTheTasksNode) {
  const TaskLaunch first = BuildTaskLaunch(Inputs(1), Catalog());
  EXPECT_EQ(Env(first, "SLURM_JOB_ID"), "42");
  EXPECT_EQ(Env(first, "SLURM_JOBID"), "42");
  EXPECT_EQ(Env(first, "SLURM_JOB_NAME"), "train");
  EXPECT_EQ(Env(first, "SLURM_JOB_PARTITION"), "research");
  EXPECT_EQ(Env(first, "SLURM_JOB_ACCOUNT"), "alice");
  EXPECT_EQ(Env(first, "SLURM_NTASKS"), "3");
  EXPECT_EQ(Env(first, "SLURM_NPROCS"), "3");
  EXPECT_EQ(Env(first, "SLURM_PROCID"), "1");
  EXPECT_EQ(Env(first, "SLURM_LOCALID"), "1");
  EXPECT_EQ(Env(first, "SLURM_NODEID"), "0");
  EXPECT_EQ(Env(first, "SLURM_NODELIST"), "a,b");
  EXPECT_EQ(Env(first, "SLURM_JOB_NODELIST"), "a,b");
  EXPECT_EQ(Env(first, "SLURM_NNODES"), "2");
  EXPECT_EQ(Env(first, "SLURM_JOB_NUM_NODES"), "2");
  EXPECT_EQ(Env(first, "SLURMD_NODENAME"), "a");
  EXPECT_EQ(Env(first, "SLURM_GPUS_ON_NODE"), "2");  // both tasks on "a"
  EXPECT_EQ(Env(first, "SLURM_CPUS_PER_TASK"), "3");  // 2500 milli-CPU, rounded up
  EXPECT_EQ(Env(first, "SLURM_SUBMIT_DIR"), "/home/alice");
  EXPECT_EQ(Env(first, "SLURM_CLUSTER_NAME"), "tessera");
  EXPECT_EQ(Env(first, "SLURM_ARRAY_JOB_ID"), "<unset>");  // not an array element

  const TaskLaunch last = BuildTaskLaunch(Inputs(2), Catalog());
  EXPECT_EQ(Env(last, "SLURM_NODEID"), "1");
  EXPECT_EQ(Env(last, "SLURM_LOCALID"), "0");
  EXPECT_EQ(Env(last, "SLURMD_NODENAME"), "b");
  EXPECT_EQ(Env(last, "SLURM_GPUS_ON_NODE"), "1");
}

TEST_F(TaskLaunchesGangTest, AnArrayElementGetsTheSlurmArrayVariables) {
  LaunchInputs in = Inputs(0);
  in.array = LaunchArray{40, 2, 5, 0, 8};
  TaskLaunch l = BuildTaskLaunch(in, Catalog());
  EXPECT_EQ(Env(l, "SLURM_ARRAY_JOB_ID"), "40");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_ID"), "2");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_COUNT"), "5");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_MIN"), "0");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_MAX"), "8");

  in.array.count = 0;  // the array's indices not known: only its id and the element's
  l = BuildTaskLaunch(in, Catalog());
  EXPECT_EQ(Env(l, "SLURM_ARRAY_JOB_ID"), "40");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_ID"), "2");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_COUNT"), "<unset>");
  EXPECT_EQ(Env(l, "SLURM_ARRAY_TASK_MIN"), "<unset>");
}

// One task holding one grant on node "s" (GPU 3 of 8, in `mode`).
struct OneTask {
  explicit OneTask(GpuGrant grant, SharingMode mode) : node(Node("s", mode)) {
    allocations = {On(NodeId(0), {grant})};
    in.job_id = 7;
    in.submission = &submission;
    in.task_nodes = {"s"};
    in.allocations = allocations;
    in.node = &node;
  }
  OneTask(const OneTask&) = delete;  // `in` points into it
  TaskLaunch Build() const { return BuildTaskLaunch(in, Catalog()); }

  JobSubmission submission;
  NodeSpec node;
  std::vector<Allocation> allocations;
  LaunchInputs in;
};

TEST(TaskLaunchesTest, AShareWithAMemoryCapGetsMpsAndLimiterLimits) {
  const TaskLaunch l = OneTask(GpuGrant{3, MilliGpu(250), MiB(10240), -1, -1},
                               SharingMode::kShared).Build();
  EXPECT_EQ(l.gpus, std::vector<int>{3});
  EXPECT_EQ(l.gpu_milli, 250);
  EXPECT_EQ(l.gpu_memory_mib, 10240);
  EXPECT_EQ(Env(l, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(Env(l, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=10240M");
  EXPECT_EQ(Env(l, "TESSERA_CUDA_COMPUTE_PERCENT"), "25");
  EXPECT_EQ(Env(l, "TESSERA_CUDA_MEMORY_LIMIT_MIB"), "10240");
  EXPECT_EQ(Env(l, "TESSERA_GPU_SHARING"), "<unset>");
}

TEST(TaskLaunchesTest, AShareWithoutAMemoryCapGetsOnlyTheComputeShare) {
  const TaskLaunch l =
      OneTask(GpuGrant{3, MilliGpu(5), MiB(0), -1, -1}, SharingMode::kShared).Build();
  EXPECT_EQ(Env(l, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "1");  // at least 1%
  EXPECT_EQ(Env(l, "TESSERA_CUDA_COMPUTE_PERCENT"), "1");
  EXPECT_EQ(Env(l, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "<unset>");
  EXPECT_EQ(Env(l, "TESSERA_CUDA_MEMORY_LIMIT_MIB"), "<unset>");
}

TEST(TaskLaunchesTest, ATimeslicedShareIsMarkedAndHasNoMpsLimits) {
  const TaskLaunch l =
      OneTask(GpuGrant{3, MilliGpu(250), MiB(0), -1, -1}, SharingMode::kTimeslice).Build();
  EXPECT_EQ(Env(l, "TESSERA_GPU_SHARING"), "timeslice");
  EXPECT_EQ(Env(l, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "<unset>");
  EXPECT_EQ(Env(l, "TESSERA_CUDA_COMPUTE_PERCENT"), "<unset>");
}

TEST(TaskLaunchesTest, AMigGrantBecomesAnInstanceToCreateByProfileName) {
  const int profile = *Catalog().Get(H100()).FindMigProfile("3g.40gb");
  const TaskLaunch l = OneTask(GpuGrant{6, MilliGpu(428), MiB(40960), profile, 4},
                               SharingMode::kMig).Build();
  ASSERT_EQ(l.mig.size(), 1u);
  EXPECT_EQ(l.mig[0], (MigRequest{6, "3g.40gb", 4}));
  EXPECT_TRUE(l.gpus.empty());
  EXPECT_EQ(l.numa_nodes, std::vector<int>{1});
  // MIG isolates in hardware: no software share limits.
  EXPECT_EQ(Env(l, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "<unset>");
}

TEST(TaskLaunchesTest, TheCheckpointDirIsTheSpecsOrOneUnderTheRoot) {
  JobSubmission named;
  named.checkpoint_dir = "/mine/ckpt";
  EXPECT_EQ(CheckpointDirOf(named, 12, "/root", "/data"), "/mine/ckpt");
  const JobSubmission plain;
  EXPECT_EQ(CheckpointDirOf(plain, 12, "/root", "/data"), "/root/12");
  EXPECT_EQ(CheckpointDirOf(plain, 12, "", "/data"), "/data/checkpoints/12");

  OneTask task(Whole(0), SharingMode::kExclusive);
  task.in.checkpoint_dir = CheckpointDirOf(plain, 7, "", "/data");
  task.in.checkpoint_managed = true;
  const TaskLaunch l = task.Build();
  EXPECT_EQ(l.checkpoint_dir, "/data/checkpoints/7");
  EXPECT_TRUE(l.checkpoint_managed);
  EXPECT_EQ(Env(l, "TESSERA_CHECKPOINT_DIR"), "/data/checkpoints/7");
}

// A job of two tasks on "a" and "b", element 9 of array 40 (indices 3..9, 4 of them).
struct ArrayElement {
  ArrayElement() {
    job.row.id = 46;
    job.row.name = "sweep";
    job.row.attempts = 2;
    job.row.tenant = "alice";
    job.row.queue = "research";
    job.submission.array_index = 9;
    job.tasks = {TaskRun{"a", 0}, TaskRun{"b", 0}};
    rec.allocations = {On(NodeId(0), {Whole(1)}), On(NodeId(1), {Whole(2)})};
  }
  LiveJob job;
  JobRecord rec;
  std::vector<int64_t> indices = {3, 5, 7, 9};
};

TEST(TaskLaunchesTest, TheJobsOwnInputsAreReadFromItAndItsRecord) {
  const ArrayElement e;
  const LaunchInputs in = LaunchInputsOf(e.job, e.rec, 1, "", "/data", 40, e.indices);
  EXPECT_EQ(in.job_id, 46u);
  EXPECT_EQ(in.job_name, "sweep");
  EXPECT_EQ(in.attempt, 2);
  EXPECT_EQ(in.tenant, "alice");
  EXPECT_EQ(in.queue, "research");
  EXPECT_EQ(in.submission, &e.job.submission);
  EXPECT_EQ(in.task, 1);
  EXPECT_EQ(in.task_nodes, (std::vector<std::string_view>{"a", "b"}));
  ASSERT_EQ(in.allocations.size(), 2u);
  EXPECT_EQ(in.allocations[1], e.rec.allocations[1]);
  EXPECT_EQ(in.checkpoint_dir, "/data/checkpoints/46");
  EXPECT_TRUE(in.checkpoint_managed);
  EXPECT_EQ(in.array.id, 40u);
  EXPECT_EQ(in.array.index, 9);
  EXPECT_EQ(in.array.count, 4u);
  EXPECT_EQ(in.array.min, 3);
  EXPECT_EQ(in.array.max, 9);
  // Left for the controller: what only its other services know.
  EXPECT_EQ(in.node, nullptr);
  EXPECT_EQ(in.master_address, "");
}

TEST(TaskLaunchesTest, AnArraysNumberingIsLeftOutWhereTheGatesDoNotKnowIt) {
  ArrayElement e;
  const LaunchInputs unknown = LaunchInputsOf(e.job, e.rec, 0, "/root", "/data", 40, {});
  EXPECT_EQ(unknown.array.id, 40u);
  EXPECT_EQ(unknown.array.index, 9);
  EXPECT_EQ(unknown.array.count, 0u);
  EXPECT_EQ(unknown.checkpoint_dir, "/root/46");
  const LaunchInputs none = LaunchInputsOf(e.job, e.rec, 0, "/root", "/data", 0, e.indices);
  EXPECT_EQ(none.array.id, 0u);
  EXPECT_EQ(none.array.index, -1);
  EXPECT_EQ(none.array.count, 0u);
  e.job.submission.checkpoint_dir = "/mine";
  const LaunchInputs named = LaunchInputsOf(e.job, e.rec, 0, "/root", "/data", 0, {});
  EXPECT_EQ(named.checkpoint_dir, "/mine");
  EXPECT_FALSE(named.checkpoint_managed);
}

}  // namespace task_launches_test
}  // namespace tessera
