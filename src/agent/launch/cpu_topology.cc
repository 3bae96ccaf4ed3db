#include "agent/launch/cpu_topology.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/file_util.h"
#include "base/strings.h"

namespace tessera {

StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  if (Trim(text).empty()) {
    return cpus;
  }
  for (std::string_view item : Split(Trim(text), ',')) {
    item = Trim(item);
    if (item.empty() || item.front() == '-' || item.front() == '+') {
      return InvalidArgumentError("bad cpulist item '" + std::string(item) + "' in '" +
                                  std::string(Trim(text)) + "'");
    }
  }
  auto ids = ParseIntList(text);
  if (!ids.ok()) {
    return InvalidArgumentError("bad cpulist '" + std::string(Trim(text)) +
                                "': " + ids.status().message());
  }
  for (int64_t id : *ids) {
    if (id < 0 || id >= kMaxCpuId) {
      return InvalidArgumentError("cpu id " + std::to_string(id) + " out of range in '" +
                                  std::string(Trim(text)) + "'");
    }
    cpus.push_back(static_cast<int>(id));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  size_t i = 0;
  while (i < cpus.size()) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    if (!out.empty()) {
      out += ',';
    }
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

std::vector<int> CpusOfNumaNode(int node, const std::string& sysfs_root) {
  if (node < 0) {
    return {};
  }
  auto text =
      ReadTextFile(sysfs_root + "/devices/system/node/node" + std::to_string(node) + "/cpulist");
  if (!text) {
    return {};
  }
  auto cpus = ParseCpuList(*text);
  return cpus.ok() ? std::move(cpus).value() : std::vector<int>{};
}

std::vector<int> OnlineNumaNodes(const std::string& sysfs_root) {
  auto text = ReadTextFile(sysfs_root + "/devices/system/node/online");
  if (!text) {
    return {};
  }
  auto nodes = ParseCpuList(*text);
  return nodes.ok() ? std::move(nodes).value() : std::vector<int>{};
}

}  // namespace tessera
