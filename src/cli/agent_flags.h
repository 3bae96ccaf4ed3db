// The node agent's flags (`tessera agent`, and the agent half of `tessera up`) and the
// AgentOptions they make (agent/agent.h).
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace CLI {
class App;
}

namespace tessera {

struct AgentOptions;  // agent/agent.h, which the daemon binary links

struct AgentFlags {
  std::string server = "http://127.0.0.1:7450";
  std::string token, token_file;
  std::string node;
  std::string data_dir = "tessera-agent";
  std::string fake_gpus;
  std::string gpu_sharing;
  std::string mps_control, cuda_limiter;
  bool mps_multi_user = false;
  std::string cpu, memory;
  std::string heartbeat;
  std::string telemetry;
  std::string ca_cert;
  bool insecure = false;
  bool no_cgroups = false;
  std::string device_dir = "/dev";
  std::string nvidia_caps_dir = "/proc/driver/nvidia/capabilities";
  bool allow_root_tasks = false;
  bool stop_kills_tasks = false;
  std::vector<std::string> labels;
  std::string containers = "auto";
  std::string podman = "podman";
  std::string cdi_dir = "/var/run/cdi";
  std::vector<std::string> container_mount_prefixes;
  std::vector<std::string> insecure_registries;
  std::string image_cache_size = "64GiB";
};

// `standalone`: `tessera agent` (not `tessera up`, which has its own --data and server).
void AddAgentFlags(CLI::App* cmd, AgentFlags* f, bool standalone);
// `standalone`: `tessera agent` (not `tessera up`, whose Ctrl-C stops the whole cluster
// and so its tasks). InvalidArgument naming the flag.
StatusOr<AgentOptions> ToAgentOptions(const AgentFlags& f, bool standalone);

}  // namespace tessera
