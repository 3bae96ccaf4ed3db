#include "server/task_launches.h"

#include <algorithm>
#include <map>
#include <set>

#include "server/job_table.h"

namespace tessera {

namespace {

// Where the task sits in its gang: the nodes in order of their first task, its node's
// position among them and its rank among the tasks on its node.
struct GangPlace {
  std::vector<std::string_view> node_order;
  std::string_view mine;
  int local_rank = 0;
  int node_rank = 0;
};

GangPlace PlaceInGang(const LaunchInputs& in) {
  GangPlace p;
  p.mine = in.task_nodes[static_cast<size_t>(in.task)];
  const int world = static_cast<int>(in.allocations.size());
  for (int t = 0; t < world; ++t) {
    const std::string_view n = in.task_nodes[static_cast<size_t>(t)];
    if (std::find(p.node_order.begin(), p.node_order.end(), n) == p.node_order.end()) {
      p.node_order.push_back(n);
    }
    if (t < in.task && n == p.mine) {
      ++p.local_rank;
    }
  }
  p.node_rank = static_cast<int>(std::find(p.node_order.begin(), p.node_order.end(), p.mine) -
                                 p.node_order.begin());
  return p;
}

// The task's GPUs: whole cards and shares by index, MIG grants as instances to create,
// and the NUMA nodes they sit on (for CPU affinity).
void AddGpus(const Allocation& a, const NodeSpec& node, const GpuCatalog& catalog, TaskLaunch& l) {
  std::set<int> numa;
  for (const GpuGrant& g : a.gpus) {
    const GpuSpec& gpu = node.gpus[static_cast<size_t>(g.gpu)];
    const GpuModel& model = catalog.Get(gpu.model);
    numa.insert(gpu.numa_node);
    if (g.is_mig()) {
      l.mig.push_back(MigRequest{g.gpu, model.mig_profiles[static_cast<size_t>(g.mig_profile)].name,
                                 g.mig_start});
    } else {
      l.gpus.push_back(g.gpu);
    }
    l.gpu_milli = g.milli.value();
    l.gpu_memory_mib = g.memory.value();
  }
  l.numa_nodes.assign(numa.begin(), numa.end());
}

// The gang's rendezvous, as torchrun sets it: one process per task.
void AddRendezvousEnv(const LaunchInputs& in, const GangPlace& p, TaskLaunch& l) {
  std::map<std::string, std::string>& e = l.env;
  e["MASTER_ADDR"] = in.master_address.empty() ? "127.0.0.1" : in.master_address;
  e["MASTER_PORT"] = std::to_string(20000 + in.job_id % 20000);
  e["WORLD_SIZE"] = std::to_string(static_cast<int>(in.allocations.size()));
  e["RANK"] = std::to_string(in.task);
  e["LOCAL_RANK"] = std::to_string(p.local_rank);
  e["NODE_RANK"] = std::to_string(p.node_rank);
  e["LOCAL_WORLD_SIZE"] = std::to_string(
      std::count(in.task_nodes.begin(), in.task_nodes.end(), p.mine));
}

// SLURM_* variables of a task (so that batch scripts written for Slurm run).
void AddSlurmEnv(const LaunchInputs& in, const GangPlace& p, TaskLaunch& l) {
  std::string nodelist;
  for (const std::string_view n : p.node_order) {
    nodelist += nodelist.empty() ? "" : ",";
    nodelist += n;
  }
  // GPUs this job holds on this node (every task of it there), as Slurm counts them.
  int gpus_here = 0;
  for (size_t t = 0; t < in.task_nodes.size() && t < in.allocations.size(); ++t) {
    if (in.task_nodes[t] == p.mine) {
      gpus_here += static_cast<int>(in.allocations[t].gpus.size());
    }
  }
  std::map<std::string, std::string>& e = l.env;
  e["SLURM_JOB_ID"] = std::to_string(in.job_id);
  e["SLURM_JOBID"] = e["SLURM_JOB_ID"];
  e["SLURM_JOB_NAME"] = in.job_name;
  e["SLURM_JOB_PARTITION"] = in.queue;
  e["SLURM_JOB_ACCOUNT"] = in.tenant;
  e["SLURM_NTASKS"] = std::to_string(in.task_nodes.size());
  e["SLURM_NPROCS"] = e["SLURM_NTASKS"];
  e["SLURM_PROCID"] = std::to_string(in.task);
  e["SLURM_LOCALID"] = std::to_string(p.local_rank);
  e["SLURM_NODEID"] = std::to_string(p.node_rank);
  e["SLURM_JOB_NODELIST"] = nodelist;
  e["SLURM_NODELIST"] = nodelist;
  e["SLURM_NNODES"] = std::to_string(p.node_order.size());
  e["SLURM_JOB_NUM_NODES"] = e["SLURM_NNODES"];
  e["SLURMD_NODENAME"] = std::string(p.mine);
  e["SLURM_GPUS_ON_NODE"] = std::to_string(gpus_here);
  e["SLURM_CPUS_PER_TASK"] = std::to_string(std::max<int64_t>(1, (l.cpu_milli + 999) / 1000));
  if (!in.submission->submit_dir.empty()) {
    e["SLURM_SUBMIT_DIR"] = in.submission->submit_dir;
  }
  e["SLURM_CLUSTER_NAME"] = "tessera";
  if (in.array.id != 0) {
    e["SLURM_ARRAY_JOB_ID"] = std::to_string(in.array.id);
    e["SLURM_ARRAY_TASK_ID"] = std::to_string(in.array.index);
    if (in.array.count > 0) {
      e["SLURM_ARRAY_TASK_COUNT"] = std::to_string(in.array.count);
      e["SLURM_ARRAY_TASK_MIN"] = std::to_string(in.array.min);
      e["SLURM_ARRAY_TASK_MAX"] = std::to_string(in.array.max);
    }
  }
}

void AddTesseraEnv(const LaunchInputs& in, TaskLaunch& l) {
  std::map<std::string, std::string>& e = l.env;
  e["TESSERA_JOB_ID"] = std::to_string(in.job_id);
  e["TESSERA_JOB_NAME"] = in.job_name;
  e["TESSERA_TASK_INDEX"] = std::to_string(in.task);
  e["TESSERA_ATTEMPT"] = std::to_string(in.attempt);
  e["TESSERA_TENANT"] = in.tenant;
  e["TESSERA_QUEUE"] = in.queue;
  e["TESSERA_CHECKPOINT_DIR"] = l.checkpoint_dir;
}

// One software share of one GPU: its limits, or the marker of a time-sliced card.
void AddShareEnv(const Allocation& a, const NodeSpec& node, TaskLaunch& l) {
  if (a.gpus.size() != 1 || a.gpus[0].is_mig()) {
    return;
  }
  const GpuGrant& g = a.gpus[0];
  if (node.gpus[static_cast<size_t>(g.gpu)].mode == SharingMode::kTimeslice) {
    // Time-slicing: replicas take turns; no MPS, no memory cap (nothing isolates it).
    l.env["TESSERA_GPU_SHARING"] = "timeslice";
  } else if (g.milli.value() < kWholeGpu.value()) {
    // A software share: MPS enforces the compute share and the memory cap.
    l.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] =
        std::to_string(std::max<int64_t>(1, g.milli.value() / 10));
    if (g.memory.value() > 0) {
      l.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(g.memory.value()) + "M";
    }
    // The same limits for the CUDA limiter the agent preloads (agent/gpu_share_env.h).
    l.env["TESSERA_CUDA_COMPUTE_PERCENT"] = l.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"];
    if (g.memory.value() > 0) {
      l.env["TESSERA_CUDA_MEMORY_LIMIT_MIB"] = std::to_string(g.memory.value());
    }
  }
}

}  // namespace

TaskLaunch BuildTaskLaunch(const LaunchInputs& in, const GpuCatalog& catalog) {
  const JobSubmission& sub = *in.submission;
  const Allocation& a = in.allocations[static_cast<size_t>(in.task)];
  TaskLaunch l;
  l.key = TaskKey{in.job_id, in.task, in.attempt};
  l.job_name = in.job_name;
  l.command = sub.command;
  l.env = sub.env;  // ours below take precedence over the submission's
  l.cpu_milli = a.cpu.value();
  l.memory_mib = a.memory.value();
  l.working_dir = sub.working_dir;
  l.submit_dir = sub.submit_dir;
  l.checkpoint_dir = in.checkpoint_dir;
  l.checkpoint_managed = in.checkpoint_managed;
  l.pty_secret = in.pty_secret;
  l.container = sub.container;
  if (in.identity.has_value()) {
    l.uid = in.identity->first;
    l.gid = in.identity->second;
  }
  AddGpus(a, *in.node, catalog, l);
  const GangPlace place = PlaceInGang(in);
  AddRendezvousEnv(in, place, l);
  AddSlurmEnv(in, place, l);
  AddTesseraEnv(in, l);
  AddShareEnv(a, *in.node, l);
  return l;
}

std::string CheckpointDirOf(const JobSubmission& submission, uint64_t job_id,
                            const std::string& checkpoint_root, const std::string& data_dir) {
  if (!submission.checkpoint_dir.empty()) {
    return submission.checkpoint_dir;
  }
  const std::string root = checkpoint_root.empty() ? data_dir + "/checkpoints" : checkpoint_root;
  return root + "/" + std::to_string(job_id);
}

LaunchInputs LaunchInputsOf(const LiveJob& job, const JobRecord& rec, int task,
                            const std::string& checkpoint_root, const std::string& data_dir,
                            uint64_t array_id, std::span<const int64_t> array_indices) {
  LaunchInputs in;
  in.job_id = job.row.id;
  in.job_name = job.row.name;
  in.attempt = job.row.attempts;
  in.tenant = job.row.tenant;
  in.queue = job.row.queue;
  in.submission = &job.submission;
  in.task = task;
  for (const TaskRun& run : job.tasks) {
    in.task_nodes.push_back(run.node);
  }
  in.allocations = rec.allocations;
  in.checkpoint_dir = CheckpointDirOf(job.submission, job.row.id, checkpoint_root, data_dir);
  in.checkpoint_managed = job.submission.checkpoint_dir.empty();
  if (array_id != 0) {
    in.array.id = array_id;
    in.array.index = job.submission.array_index;
    if (!array_indices.empty()) {
      in.array.count = array_indices.size();
      in.array.min = array_indices.front();
      in.array.max = array_indices.back();
    }
  }
  return in;
}

}  // namespace tessera
