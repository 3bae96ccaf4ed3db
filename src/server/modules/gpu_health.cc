#include "server/modules/gpu_health.h"

#include <array>
#include <utility>

namespace tessera {

std::string_view HealthKindName(HealthKind kind) {
  switch (kind) {
    case HealthKind::kLost:
      return "lost";
    case HealthKind::kXid:
      return "xid";
    case HealthKind::kEcc:
      return "ecc";
    case HealthKind::kTemperature:
      return "temperature";
  }
  return "unknown";
}

std::optional<HealthKind> ParseHealthKind(std::string_view name) {
  for (HealthKind k : {HealthKind::kLost, HealthKind::kXid, HealthKind::kEcc, HealthKind::kTemperature}) {
    if (HealthKindName(k) == name) {
      return k;
    }
  }
  return std::nullopt;
}

bool FaultEndsWork(const HealthFinding& finding) {
  switch (finding.kind) {
    case HealthKind::kLost:
    case HealthKind::kEcc:
      return true;
    case HealthKind::kXid:
      return finding.xid == 48 || finding.xid == 79 || finding.xid == 94 || finding.xid == 95;
    case HealthKind::kTemperature:
      return false;
  }
  return false;
}

bool ApplicationXid(int xid) { return xid == 13 || xid == 31 || xid == 43 || xid == 45; }

std::string_view XidDescription(int xid) {
  static constexpr std::array<std::pair<int, std::string_view>, 17> kKnown = {{
      {13, "graphics engine exception"},
      {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},
      {45, "preemptive cleanup"},
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping event"},
      {64, "ECC page retirement or row remapping failure"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {109, "context switch timeout"},
      {119, "GSP RPC timeout"},
      {120, "GSP error"},
  }};
  for (const auto& [code, text] : kKnown) {
    if (code == xid) {
      return text;
    }
  }
  return "";
}

std::optional<HealthFinding> CheckGpuHealth(const GpuTelemetry* previous, const GpuTelemetry& now,
                                            const GpuHealthOptions& options) {
  if (now.lost) {
    return HealthFinding{HealthKind::kLost, "GPU lost: the driver cannot reach it"};
  }
  if (previous != nullptr && now.xid_count > previous->xid_count && !ApplicationXid(now.last_xid)) {
    std::string reason = "XID " + std::to_string(now.last_xid);
    const std::string_view what = XidDescription(now.last_xid);
    if (!what.empty()) {
      reason += " (" + std::string(what) + ")";
    }
    return HealthFinding{HealthKind::kXid, std::move(reason), now.last_xid};
  }
  if (previous != nullptr && now.ecc_dbe_volatile > previous->ecc_dbe_volatile) {
    return HealthFinding{HealthKind::kEcc,
                         std::to_string(now.ecc_dbe_volatile - previous->ecc_dbe_volatile) +
                             " uncorrectable ECC error(s)"};
  }
  if (now.temp_c >= options.temperature_limit_c) {
    return HealthFinding{HealthKind::kTemperature,
                         "temperature " + std::to_string(now.temp_c) + " C (limit " +
                             std::to_string(options.temperature_limit_c) + " C)"};
  }
  return std::nullopt;
}

}  // namespace tessera
