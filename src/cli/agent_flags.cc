#include "cli/agent_flags.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>

#include "agent/agent.h"
#include "api/node_labels.h"
#include "api/units.h"
#include "base/file_util.h"
#include "base/strings.h"

namespace tessera {
namespace {

void AddContainerFlags(CLI::App* cmd, AgentFlags* f) {
  cmd->add_option("--containers", f->containers,
                  "Run jobs that name an image in containers (Podman with runc, as root): auto "
                  "(when Podman works; the node is labelled containers=podman), on (refuse to "
                  "start without), off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--podman", f->podman, "The Podman program")->capture_default_str();
  cmd->add_option("--cdi-dir", f->cdi_dir,
                  "Where the CDI spec of this node's GPUs is written (Podman reads /etc/cdi "
                  "and /var/run/cdi)")
      ->capture_default_str();
  cmd->add_option("--container-mount-prefix", f->container_mount_prefixes,
                  "A host directory jobs may mount into their containers (repeatable; default: "
                  "none)")
      ->allow_extra_args(false);
  cmd->add_option("--image-cache-size", f->image_cache_size,
                  "Keep this node's image store to this size after each pull, least recently "
                  "used images no task uses removed first, e.g. 64GiB; 0: no bound")
      ->capture_default_str();
  cmd->add_option("--insecure-registry", f->insecure_registries,
                  "A registry (HOST:PORT) reached over plain HTTP (repeatable)")
      ->allow_extra_args(false);
}

Status ToContainerOptions(const AgentFlags& f, AgentOptions* o) {
  o->containers = f.containers;
  o->podman = f.podman;
  o->cdi_dir = f.cdi_dir;
  for (const std::string& p : f.container_mount_prefixes) {
    if (p.empty() || p.front() != '/') {
      return InvalidArgumentError("--container-mount-prefix must be an absolute path, got '" + p +
                                  "'");
    }
  }
  o->container_mount_prefixes = f.container_mount_prefixes;
  o->container_insecure_registries = f.insecure_registries;
  if (f.image_cache_size == "0") {
    o->image_cache_mib = 0;
  } else {
    StatusOr<int64_t> mib = ParseMemoryMiB(f.image_cache_size);
    if (!mib.ok()) {
      return InvalidArgumentError("--image-cache-size: " + mib.status().message());
    }
    o->image_cache_mib = *mib;
  }
  return Status::Ok();
}

}  // namespace

void AddAgentFlags(CLI::App* cmd, AgentFlags* f, bool standalone) {
  if (standalone) {
    cmd->add_option("--server", f->server,
                    "The controller's URL, or the URLs of a cluster's controllers joined by ',' "
                    "(tried in turn; the leader is followed)")
        ->capture_default_str();
    cmd->add_option("--token", f->token, "The controller's join token");
    cmd->add_option("--token-file", f->token_file, "File holding the join token");
    cmd->add_option("--node", f->node, "Node name (default: the host name)");
    cmd->add_option("--data", f->data_dir, "Agent data directory (task logs)")
        ->capture_default_str();
    cmd->add_option("--ca-cert", f->ca_cert, "CA certificate for an https:// controller");
    cmd->add_flag("--insecure", f->insecure, "Do not verify the controller's certificate");
    cmd->add_option("--heartbeat", f->heartbeat, "Heartbeat interval (default: the controller's)");
    // An agent restart or upgrade must not end a week of training: the next agent on
    // this data directory adopts what is running.
    cmd->add_flag("--stop-kills-tasks", f->stop_kills_tasks,
                  "On SIGTERM kill the tasks (default: leave them running for the next agent "
                  "on this --data to adopt)");
  }
  cmd->add_option("--device-dir", f->device_dir,
                  "Where the GPUs' device nodes are (DIR/nvidia<minor>, MIG capabilities in "
                  "DIR/nvidia-caps/); a task may open only its own")
      ->capture_default_str();
  cmd->add_option("--nvidia-caps-dir", f->nvidia_caps_dir,
                  "Where the driver says which capability node opens which MIG instance")
      ->capture_default_str();
  cmd->add_flag("--allow-root-tasks", f->allow_root_tasks,
                "Run tasks as root when the controller gives no uid (one-user machines only)");
  cmd->add_option("--fake-gpus", f->fake_gpus,
                  "Fake GPU inventory, e.g. 8xH100-80GB or 2x4xA100-80GB,mig (default: NVML)");
  cmd->add_option("--gpu-sharing", f->gpu_sharing,
                  "Sharing mode per GPU, e.g. all=shared or 0,1=shared;2=timeslice:4 (modes: "
                  "exclusive, shared, timeslice:N; default: as discovered)");
  cmd->add_option("--mps-control", f->mps_control,
                  "The MPS control program run per shared GPU, or 'none' (default: "
                  "nvidia-cuda-mps-control on PATH; none with --fake-gpus)");
  cmd->add_flag("--mps-multi-user", f->mps_multi_user,
                "This node's MPS serves clients of several Unix users at once (it must be set "
                "up that way, e.g. through --mps-control): tenants' shares may then meet on one "
                "shared GPU (label mps-multi-user=on). Default: one user per GPU's MPS server");
  cmd->add_option("--cuda-limiter", f->cuda_limiter,
                  "The CUDA limiter preloaded into tasks on shared GPUs, or 'none' (default: "
                  "lib/libtessera_cuda_limiter.so beside tessera, then ../lib/tessera/)");
  cmd->add_option("--telemetry-interval", f->telemetry,
                  "Least time between GPU telemetry samples sent in heartbeats, e.g. 5s; 0: "
                  "none (default: 1s)");
  cmd->add_option("--cpu", f->cpu, "CPUs offered (default: the machine's)");
  cmd->add_option("--memory", f->memory, "Memory offered, e.g. 64GiB (default: the machine's)");
  cmd->add_flag("--no-cgroups", f->no_cgroups, "Do not apply cgroup v2 CPU and memory limits");
  cmd->add_option("--label", f->labels,
                  "Node labels, e.g. rack=r1,block=b2 (repeatable): gangs with topology scope "
                  "rack or block stay within one; nvlink-domain overrides the GPUs' fabric")
      ->allow_extra_args(false);
  AddContainerFlags(cmd, f);
}

StatusOr<AgentOptions> ToAgentOptions(const AgentFlags& f, bool standalone) {
  AgentOptions o;
  o.server_url = f.server;
  o.token = f.token;
  if (o.token.empty() && !f.token_file.empty()) {
    std::optional<std::string> t = ReadTextFile(f.token_file);
    if (!t) {
      return InvalidArgumentError("--token-file: cannot read " + f.token_file);
    }
    o.token = std::string(Trim(*t));
  }
  if (o.token.empty()) {
    if (const char* env = std::getenv("TESSERA_JOIN_TOKEN")) {
      o.token = env;
      // Not inherited by anything the agent starts. (/proc/PID/environ still shows the
      // original block, but only to this uid and root.)
      ::unsetenv("TESSERA_JOIN_TOKEN");
    }
  }
  o.node_name = f.node;
  o.data_dir = f.data_dir;
  o.fake_gpus = f.fake_gpus;
  o.gpu_sharing = f.gpu_sharing;
  o.mps_control = f.mps_control;
  o.cuda_limiter = f.cuda_limiter;
  o.mps_multi_user = f.mps_multi_user;
  o.ca_cert = f.ca_cert;
  o.insecure = f.insecure;
  o.use_cgroups = !f.no_cgroups;
  o.device_dir = f.device_dir;
  o.nvidia_caps_dir = f.nvidia_caps_dir;
  o.allow_root_tasks = f.allow_root_tasks;
  o.keep_tasks_on_stop = standalone && !f.stop_kills_tasks;
  TESSERA_ASSIGN_OR_RETURN(o.labels, ParseNodeLabelArgs(f.labels));
  TESSERA_RETURN_IF_ERROR(ToContainerOptions(f, &o));
  if (!f.cpu.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.cpu_milli, ParseCpuMilli(f.cpu));
  }
  if (!f.memory.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.memory_mib, ParseMemoryMiB(f.memory));
  }
  if (!f.heartbeat.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.heartbeat_interval, ParseDurationMicros(f.heartbeat));
  }
  if (!f.telemetry.empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.telemetry_interval, ParseDurationMicros(f.telemetry));
  }
  return o;
}

}  // namespace tessera
