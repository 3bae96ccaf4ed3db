// The agent protocol's bounds, shared by its two codecs (api/agent_protocol.h for JSON,
// api/agent_channel_codec.h for the agent channel's protobuf messages) so that both
// refuse the same messages.
// Thread safety: constants.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::agent_limits {

inline constexpr size_t kMaxIdLength = 256;  // node names, agent ids, UUIDs, job names
inline constexpr size_t kMaxLabels = 256;
inline constexpr size_t kMaxLabelLength = 1024;
// GPUs in a sample; GPUs and MIG requests of a launch.
inline constexpr size_t kMaxGpusPerNode = 64;
inline constexpr size_t kMaxMigPerGpu = 16;
inline constexpr size_t kMaxMessageBytes = 64 * 1024;  // a task report's message
inline constexpr size_t kMaxTasksPerMessage = 65'536;  // reports, launches, stops
inline constexpr size_t kMaxLaunchEnvBytes = 1 << 20;  // a launch's environment, names included
inline constexpr size_t kMaxProfileLength = 64;        // MIG profile names
inline constexpr size_t kMaxPtySecretLength = 256;
// A Podman auth file with one registry's credential (api/agent_protocol.h).
inline constexpr size_t kMaxRegistryAuthLength = 8192;
inline constexpr size_t kMaxNumaNodes = 64;  // NUMA node indices are 0..kMaxNumaNodes-1
inline constexpr int64_t kMaxGpuIndex = 1023;
inline constexpr int64_t kMaxGraceMs = int64_t{7} * 24 * 3600 * 1000;
inline constexpr int64_t kMaxHeartbeatMs = 3'600'000;
inline constexpr int64_t kMaxNodeTimeoutMs = int64_t{24} * 3'600'000;
inline constexpr int64_t kMaxUnixId = 4'294'967'294;  // (uid_t)-1 means "unchanged" to the kernel
inline constexpr int64_t kMaxReportSignal = 128;      // a report's signal: 0..128
inline constexpr int64_t kMaxStopSignal = 64;         // a stop's signal: 1..64
inline constexpr int64_t kMaxPort = 65535;
// Plausible GPU temperatures in degrees Celsius (sensors report whole degrees).
inline constexpr int64_t kMinTempC = -273;
inline constexpr int64_t kMaxTempC = 1000;

}  // namespace tessera::agent_limits
