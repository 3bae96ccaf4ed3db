// Agent: tasks in container images (declared in agent.h). The runtime itself is
// agent/runtime/container_runtime.h; this file is what the agent does with it: whether
// the node runs containers (and says so in a label), the CDI spec of its GPUs, turning a
// prepared bare launch into a `podman run` under the same shim, pulling the image
// before the start, and what a container's end needs.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "agent/agent.h"
#include "agent/agent_gpu_shares.h"
#include "agent/runtime/cdi_spec.h"
#include "agent/runtime/container_runtime.h"
#include "agent/runtime/mount_staging.h"

namespace tessera {
namespace {

std::string ContainerEnvPath(const std::string& data_dir, const std::string& id) {
  return ContainerEnvFile(data_dir + "/containers", id);
}

}  // namespace

Status Agent::InitContainers() {
  if (options_.containers == "off") {
    return Status::Ok();
  }
  ContainerRuntimeOptions o;
  o.podman = options_.podman;
  o.storage_dir = options_.data_dir + "/containers";
  o.mount_prefixes = options_.container_mount_prefixes;
  o.insecure_registries = options_.container_insecure_registries;
  StatusOr<std::unique_ptr<ContainerRuntime>> rt = ContainerRuntime::Create(std::move(o));
  if (!rt.ok()) {
    if (options_.containers == "on") {
      return rt.status();
    }
    std::cerr << "tessera agent: no containers on this node: " << rt.status().message()
              << " (jobs with an image go to nodes labelled containers=podman)\n";
    return Status::Ok();
  }
  if (::geteuid() != 0) {
    const std::string why = "containers need a root agent (rootful Podman); this one is not root";
    if (options_.containers == "on") {
      return FailedPreconditionError(why);
    }
    std::cerr << "tessera agent: no containers on this node: " << why << "\n";
    return Status::Ok();
  }
  containers_ = std::move(*rt);
  // Found once: the driver's files change only with a driver upgrade, which restarts
  // the agent, and the spec is rewritten under the agent's lock.
  driver_files_ = FindDriverFiles(
      {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"},
      {"/usr/bin"});
  std::cerr << "tessera agent: containers: " << containers_->description() << "\n";
  return Status::Ok();
}

Status Agent::WriteNodeCdiSpec() {
  if (!containers_) {
    return Status::Ok();
  }
  CdiSpecInput in;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    CdiDevice d = GpuCdiDevice(gpus_[g].uuid, GpuMinor(static_cast<int>(g)), options_.device_dir);
    if (IsCdiDeviceName(d.name)) {
      in.devices.push_back(std::move(d));
    }
  }
  for (const auto& [uuid, device] : cdi_mig_) {
    in.devices.push_back(device);
  }
  in.control_nodes = ControlNodes(options_.device_dir);
  in.driver_files = driver_files_;
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json spec, CdiSpecJson(in));
  return WriteCdiSpec(options_.cdi_dir, options_.node_name, spec);
}

StatusOr<LaunchSpec> Agent::ContainerLaunchSpec(const LocalTask& t, LaunchSpec bare,
                                                const JobSandbox& box,
                                                const std::vector<std::string>& visible,
                                                const std::vector<GpuDeviceGrant>& granted) {
  const TaskLaunch& l = t.launch;
  if (!containers_) {
    return FailedPreconditionError("this node cannot run containers (image " + l.container.image +
                                   "): it has no container runtime");
  }
  ContainerTask task;
  task.id = t.id;
  task.container = l.container;
  task.command = l.command;
  task.uid = bare.uid >= 0 ? bare.uid : static_cast<int64_t>(::geteuid());
  task.gid = bare.gid >= 0 ? bare.gid : static_cast<int64_t>(::getegid());
  // A mount's source, links resolved, must be allowed here and open to the task's uid
  // through the host's permissions: Podman mounts as root, past any closed directory.
  // What was checked is bound now (mount_staging.h), so a later swap changes nothing.
  const std::string staging = StagingDir(t.id);
  if (!task.container.mounts.empty()) {
    TESSERA_RETURN_IF_ERROR(MakeDirs(staging, 0700));
  }
  for (size_t i = 0; i < task.container.mounts.size(); ++i) {
    ContainerMount& m = task.container.mounts[i];
    std::string prefix;
    TESSERA_ASSIGN_OR_RETURN(
        std::string real, CheckMountSource(m.source, options_.container_mount_prefixes, &prefix));
    if (!Reachable(real, bare.uid, bare.gid)) {
      return PermissionDeniedError("mount source " + m.source + " is closed to the task's uid " +
                                   std::to_string(task.uid));
    }
    const std::string bound = staging + "/" + std::to_string(i);
    TESSERA_RETURN_IF_ERROR(StageMount(prefix, real, bound));
    m.source = bound;
  }
  // The devices: each visible UUID is one CDI device; a new MIG instance joins the spec.
  bool new_mig = false;
  for (size_t i = 0; i < visible.size() && i < granted.size(); ++i) {
    const GpuDeviceGrant& g = granted[i];
    if (g.gpu_instance >= 0) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> caps,
                               MigCapabilityNodes(options_.nvidia_caps_dir, g));
      CdiDevice d{visible[i], {}, {}};
      const std::string card = "/nvidia" + std::to_string(g.minor);
      d.nodes.push_back({"/dev" + card, options_.device_dir + card});
      for (const std::string& cap : caps) {
        d.nodes.push_back({"/dev/nvidia-caps/" + cap, options_.device_dir + "/nvidia-caps/" + cap});
      }
      cdi_mig_[visible[i]] = std::move(d);
      new_mig = true;
    }
    task.cdi_devices.push_back(CdiDeviceName(visible[i]));
  }
  if (new_mig) {
    TESSERA_RETURN_IF_ERROR(WriteNodeCdiSpec());
  }
  // The job's sandbox (HOME and TMPDIR live in it) and the checkpoint directory, at their
  // host paths; with mount_home false only TMPDIR, and HOME is the image's.
  std::map<std::string, std::string> env = bare.env;
  if (l.container.mount_home) {
    task.own_dirs.push_back(box.dir);
  } else {
    task.own_dirs.push_back(box.tmp);
    env.erase("HOME");
  }
  if (!l.checkpoint_dir.empty()) {
    // The controller's own is the agent's to make; one the job named must be one the
    // tenant could reach itself, links resolved, as a bare task would.
    std::string dir = l.checkpoint_dir;
    if (!l.checkpoint_managed) {
      std::error_code ec;
      dir = std::filesystem::canonical(l.checkpoint_dir, ec).string();
      if (ec || !Reachable(dir, bare.uid, bare.gid)) {
        return PermissionDeniedError("checkpoint directory " + l.checkpoint_dir +
                                     " is not one the task's uid can reach");
      }
    }
    task.own_dirs.push_back(dir);
  }
  // A share's MPS directories and the CUDA limiter come along: the agent's own values
  // (agent_gpu_shares.h), never the job's, which could name any host path.
  std::map<std::string, std::string> share_env;
  gpu_shares_->AddEnv(l, &share_env);
  for (const char* key : {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"}) {
    if (auto it = share_env.find(key); it != share_env.end() && !it->second.empty()) {
      task.own_dirs.push_back(it->second);
    }
  }
  if (auto it = share_env.find("LD_PRELOAD"); it != share_env.end() && !it->second.empty()) {
    task.host_files.push_back(it->second);
  }
  task.env_file = ContainerEnvPath(options_.data_dir, t.id);
  TESSERA_RETURN_IF_ERROR(WriteContainerEnv(task.env_file, env));
  task.cpus = bare.cpus;
  task.cpu_milli = bare.cpu_milli;
  task.memory_mib = bare.memory_mib;
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> argv, containers_->RunArgs(task));

  // The leader is Podman, as root (it needs it; the container's process is the task's
  // uid); it sees none of the task's environment and no device is hidden from it.
  LaunchSpec spec = std::move(bare);
  spec.argv = std::move(argv);
  spec.env = containers_->PodmanEnv();
  spec.working_dir = options_.data_dir + "/containers";
  spec.uid = -1;
  spec.gid = -1;
  spec.hidden_devices.clear();
  spec.cpus.clear();  // Podman's own threads need not share the task's CPUs
  return spec;
}

void Agent::SetProgress(const std::string& id, const std::string& note) {
  bool first = false;
  {
    MutexLock lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || !it->second.starting) {
      return;
    }
    first = it->second.progress.empty();
    it->second.progress = note;
  }
  if (first) {
    ReportSoon();  // the pull has begun: say so now; later notes ride the heartbeats
  }
}

Status Agent::PrepareImage(const std::string& id, const TaskLaunch& launch,
                           const std::string& registry_auth) {
  const std::string& image = launch.container.image;
  if (launch.container.empty() || !containers_) {
    return Status::Ok();
  }
  containers_->Used(image);
  // The registry is asked once per tenant and image on this node, with the tenant's own
  // credential (ContainerRuntime::Pull); the controller names the tenant in every launch.
  const auto tenant = launch.env.find("TESSERA_TENANT");
  const std::string who = tenant == launch.env.end() ? "" : tenant->second;
  if (containers_->AllowedFromStore(who, image)) {
    return Status::Ok();
  }
  SetProgress(id, "pulling image " + image);  // also while another pull of it runs
  TESSERA_RETURN_IF_ERROR(containers_->Pull(
      image, registry_auth, who, [&](const std::string& note) { SetProgress(id, note); }));
  if (options_.image_cache_mib > 0) {
    std::set<std::string> in_use = {image};
    {
      MutexLock lock(mu_);
      for (const auto& [unused, t] : tasks_) {
        if (!t.exited && !t.launch.container.empty()) {
          in_use.insert(t.launch.container.image);
        }
      }
    }
    StatusOr<int> removed = containers_->KeepWithin(options_.image_cache_mib << 20, in_use);
    if (!removed.ok()) {
      std::cerr << "tessera agent: image cache: " << removed.status().message() << "\n";
    }
  }
  return Status::Ok();
}

void Agent::ContainerEnded(LocalTask& t, const TaskExit& e) {
  if (t.launch.container.empty()) {
    return;
  }
  if (e.status_known && e.signal == 0) {
    if (std::string why = PodmanFailure(e.exit_code, ReadFileTail(t.log_path, 4096));
        !why.empty()) {
      // Podman itself failed (exit 125, or 126/127 with its or catatonit's message): the
      // command never ran, as a bare task whose exec failed.
      t.failed_to_start = true;
      t.exit_code = 0;
      t.message = "the container could not start: " + why;
      ForgetContainer(t.id);
      return;
    }
    const auto [code, sig] = ContainerExit(e.exit_code);
    t.exit_code = sig != 0 ? 0 : code;
    t.signal = sig;
  }
  ForgetContainer(t.id);
}

void Agent::ForgetContainer(const std::string& task_id) {
  if (!containers_) {
    return;
  }
  // Podman removes a container that ended by itself (--rm); one whose Podman was
  // killed is left listed, holding its name and its image. Removed on a launch thread,
  // or here when none runs (the agent is stopping).
  ContainerRuntime* rt = containers_.get();
  {
    MutexLock lock(launch_mu_);
    if (!launchers_.empty()) {
      launch_queue_.push_back([rt, task_id] { rt->Remove(task_id); });
      ++launches_in_flight_;
      launch_cv_.NotifyAll();  // one condition for both queues: wake their threads too
      return;
    }
  }
  rt->Remove(task_id);
}

std::string Agent::StagingDir(const std::string& task_id) const {
  return options_.data_dir + "/containers/mounts/" + task_id;
}

void Agent::ReconcileContainers() {
  if (!containers_) {
    return;
  }
  std::set<std::string> live;
  for (const auto& [id, t] : tasks_) {
    if (!t.exited && !t.launch.container.empty()) {
      live.insert(ContainerName(id));
    }
  }
  std::error_code ec;
  const std::string mounts = options_.data_dir + "/containers/mounts";
  for (auto it = std::filesystem::directory_iterator(mounts, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string id = it->path().filename().string();
    if (live.count(ContainerName(id)) == 0) {
      UnstageMounts(it->path().string());  // its container is gone, or will be below
    }
  }
  for (const std::string& name : containers_->ListTaskContainers()) {
    if (live.count(name) == 0) {
      std::cerr << "tessera agent: removing container " << name << ", which no task owns\n";
      containers_->Remove(name.substr(std::string("tessera-").size()));
    }
  }
}

}  // namespace tessera
