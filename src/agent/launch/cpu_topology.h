// CPU topology helpers for the task launcher: the Linux cpulist text ("0-3,8,10-11")
// and the CPUs of a NUMA node as sysfs lists them.
//
// Contract: pure functions over text or a sysfs tree; the sysfs root is a parameter so
// tests can point it at a fake directory. CPU ids are returned sorted and without
// duplicates. Thread safety: all functions are thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

// CPU ids at or above this are rejected as malformed input (Linux's own limit is 8192).
inline constexpr int kMaxCpuId = 65536;

// Parses a cpulist such as "0-3,8,10-11" (whitespace and a trailing newline allowed).
// An empty or blank text is the empty set (sysfs writes that for a CPU-less node).
// InvalidArgument for anything else that is not a list of ids in [0, kMaxCpuId).
StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// The canonical cpulist text of `cpus`: sorted, ranges folded ("0-3,8,10-11"); "" when
// empty. Duplicates are ignored.
std::string FormatCpuList(std::vector<int> cpus);

// CPUs of NUMA node `node`, from <sysfs_root>/devices/system/node/node<N>/cpulist.
// Empty when the node or the file is absent or unreadable.
std::vector<int> CpusOfNumaNode(int node, const std::string& sysfs_root = "/sys");

// NUMA nodes with memory or CPUs online, from <sysfs_root>/devices/system/node/online.
// Empty when absent (no NUMA support in the kernel: treat the machine as one node).
std::vector<int> OnlineNumaNodes(const std::string& sysfs_root = "/sys");

}  // namespace tessera
