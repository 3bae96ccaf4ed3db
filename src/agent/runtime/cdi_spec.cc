#include "agent/runtime/cdi_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "api/json_fields.h"

namespace tessera {
namespace {

using Json = nlohmann::json;

Json NodeJson(const CdiDeviceNode& node) {
  return {{"path", node.path}, {"hostPath", node.host_path}};
}

bool IsCharDevice(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

std::string CdiSpecPath(const std::string& cdi_dir, const std::string& node) {
  return cdi_dir + "/tessera-" + node + ".json";
}

bool IsDriverLibrary(const std::string& name) {
  for (const char* prefix : {"libcuda.so", "libnvidia-", "libnvcuvid.so", "libnvoptix.so"}) {
    if (name.rfind(prefix, 0) == 0 && name.find(".so") != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string CdiDeviceName(const std::string& name) { return std::string(kCdiKind) + "=" + name; }

bool IsCdiDeviceName(const std::string& name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name.front()))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
           c == '-';
  });
}

StatusOr<Json> CdiSpecJson(const CdiSpecInput& input) {
  Json devices = Json::array();
  std::set<std::string> names;
  for (const CdiDevice& d : input.devices) {
    if (!IsCdiDeviceName(d.name)) {
      return InvalidArgumentError("'" + d.name + "' is not a CDI device name");
    }
    if (!names.insert(d.name).second) {
      return InvalidArgumentError("the CDI device '" + d.name + "' is listed twice");
    }
    Json nodes = Json::array();
    for (const CdiDeviceNode& n : d.nodes) {
      nodes.push_back(NodeJson(n));
    }
    Json edits = Json::object();
    if (!nodes.empty()) {
      edits["deviceNodes"] = std::move(nodes);
    }
    if (!d.env.empty()) {
      edits["env"] = d.env;
    }
    if (edits.empty()) {
      return InvalidArgumentError("the CDI device '" + d.name + "' has no edit (CDI refuses it)");
    }
    devices.push_back({{"name", d.name}, {"containerEdits", std::move(edits)}});
  }
  Json common = Json::object();
  if (!input.control_nodes.empty()) {
    Json nodes = Json::array();
    for (const CdiDeviceNode& n : input.control_nodes) {
      nodes.push_back(NodeJson(n));
    }
    common["deviceNodes"] = std::move(nodes);
  }
  if (!input.driver_files.empty()) {
    Json mounts = Json::array();
    for (const std::string& f : input.driver_files) {
      mounts.push_back(
          {{"hostPath", f}, {"containerPath", f}, {"options", {"ro", "nosuid", "nodev", "bind"}}});
    }
    common["mounts"] = std::move(mounts);
  }
  Json spec = {{"cdiVersion", kCdiVersion}, {"kind", kCdiKind}, {"devices", std::move(devices)}};
  if (!common.empty()) {
    spec["containerEdits"] = std::move(common);
  }
  return spec;
}

CdiDevice GpuCdiDevice(const std::string& uuid, int minor, const std::string& device_dir) {
  const std::string node = "/nvidia" + std::to_string(minor);
  CdiDevice d{uuid, {}, {}};
  if (IsCharDevice(device_dir + node)) {
    d.nodes.push_back({"/dev" + node, device_dir + node});
  } else {
    d.env.push_back("TESSERA_GPU_" + std::to_string(minor) + "=" + uuid);
  }
  return d;
}

std::vector<CdiDeviceNode> ControlNodes(const std::string& device_dir) {
  std::vector<CdiDeviceNode> out;
  for (const char* name : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    const std::string host = device_dir + "/" + name;
    if (IsCharDevice(host)) {
      out.push_back({std::string("/dev/") + name, host});
    }
  }
  return out;
}

std::vector<std::string> FindDriverFiles(const std::vector<std::string>& lib_dirs,
                                         const std::vector<std::string>& bin_dirs) {
  std::set<std::string> out;
  std::error_code ec;
  for (const std::string& dir : lib_dirs) {
    // increment(ec): a directory that goes bad while read ends the walk, never throws.
    for (auto it = std::filesystem::directory_iterator(dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (IsDriverLibrary(it->path().filename().string())) {
        out.insert(it->path().string());
      }
    }
    ec.clear();
  }
  for (const std::string& dir : bin_dirs) {
    for (const char* name : {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                             "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
      const std::string path = dir + "/" + name;
      if (std::filesystem::is_regular_file(path, ec)) {
        out.insert(path);
      }
    }
  }
  return {out.begin(), out.end()};
}

void RemoveCdiSpec(const std::string& cdi_dir, const std::string& node) {
  std::error_code ec;
  std::filesystem::remove(CdiSpecPath(cdi_dir, node), ec);
}

Status WriteCdiSpec(const std::string& cdi_dir, const std::string& node, const Json& spec) {
  std::error_code ec;
  if (!std::filesystem::is_directory(cdi_dir, ec)) {
    std::filesystem::create_directories(cdi_dir, ec);
    if (ec) {
      return InternalError("CDI directory " + cdi_dir + ": " + ec.message());
    }
    ::chmod(cdi_dir.c_str(), 0755);
  }
  const std::string path = CdiSpecPath(cdi_dir, node);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << DumpJson(spec, 2) << "\n";  // a host path need not be UTF-8: never throws
    if (!out.flush()) {
      return InternalError("cannot write " + tmp);
    }
  }
  ::chmod(tmp.c_str(), 0644);
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return InternalError("cannot write " + path + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace tessera
