// The Container Device Interface spec (version 0.5.0, which Debian's Podman 4.3 reads)
// that an agent writes for the GPUs and MIG instances it manages, so that a container
// gets its task's devices by name (`podman run --device tessera.io/gpu=<UUID>`) and no
// others.
//
// One spec file per node, kind "tessera.io/gpu", one device per GPU and per MIG
// instance, named by its UUID (unique across nodes and agents, and a legal CDI name):
//   - a GPU: its /dev/nvidia<minor>;
//   - a MIG instance: its card's node and the two capability nodes that open its GPU
//     and compute instances (/dev/nvidia-caps/nvidia-cap<N>, task_sandbox.h);
//   - every device: the control nodes that exist (nvidiactl, nvidia-uvm,
//     nvidia-uvm-tools, nvidia-modeset) and the driver's user-space files (libcuda,
//     libnvidia-*, nvidia-smi, ...) mounted read-only at their host paths.
// The container path of a node is its /dev path; the host path is under the agent's
// device directory (fake device nodes in tests). CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES are not spec edits: CDI merges the edits of every device a
// container gets, so a per-device value would keep only one; the agent sets them per
// task, to all its UUIDs.
// Thread safety: pure functions, except WriteCdiSpec and FindDriverFiles (file system).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

inline constexpr const char* kCdiKind = "tessera.io/gpu";
inline constexpr const char* kCdiVersion = "0.5.0";

struct CdiDeviceNode {
  std::string path;       // in the container
  std::string host_path;  // on the node
  bool operator==(const CdiDeviceNode&) const = default;
};

struct CdiDevice {
  std::string name;  // a UUID
  std::vector<CdiDeviceNode> nodes;
  // NAME=VALUE; CDI refuses a device without any edit, so a GPU with no device node
  // (fake GPUs) gets one of these instead.
  std::vector<std::string> env;
};

struct CdiSpecInput {
  std::vector<CdiDevice> devices;
  std::vector<CdiDeviceNode> control_nodes;  // existing control nodes
  std::vector<std::string> driver_files;     // host paths, mounted read-only in place
};

// "tessera.io/gpu=<name>".
std::string CdiDeviceName(const std::string& name);
// Whether `name` is a legal CDI device name: [A-Za-z0-9][A-Za-z0-9_.:-]*.
bool IsCdiDeviceName(const std::string& name);

// The spec document. InvalidArgument for a device name CDI would refuse or a name
// listed twice.
StatusOr<nlohmann::json> CdiSpecJson(const CdiSpecInput& input);

// The device of one GPU: its node <device_dir>/nvidia<minor> (/dev/nvidia<minor> inside)
// when it is a character device; otherwise (fake GPUs) an environment edit
// TESSERA_GPU_<minor>=<uuid> in its place.
CdiDevice GpuCdiDevice(const std::string& uuid, int minor, const std::string& device_dir);

// The control nodes of `device_dir` that exist, as CdiDeviceNodes (container path
// /dev/<name>).
std::vector<CdiDeviceNode> ControlNodes(const std::string& device_dir);
// The driver's user-space files present in `lib_dirs` and `bin_dirs` (libcuda.so*,
// libnvidia-*.so*, libnvcuvid.so*, libnvoptix.so*; nvidia-smi, nvidia-debugdump,
// nvidia-persistenced, nvidia-cuda-mps-control, nvidia-cuda-mps-server), sorted.
std::vector<std::string> FindDriverFiles(const std::vector<std::string>& lib_dirs,
                                         const std::vector<std::string>& bin_dirs);

// Writes the spec to `<cdi_dir>/tessera-<node>.json` (mode 0644; the directory made
// 0755 if missing), atomically (a temporary file renamed over it).
Status WriteCdiSpec(const std::string& cdi_dir, const std::string& node,
                    const nlohmann::json& spec);
// Removes that file, if there.
void RemoveCdiSpec(const std::string& cdi_dir, const std::string& node);

}  // namespace tessera
