// GPU health: which telemetry takes a GPU out of service, and why, in words.
//
// The controller calls CheckGpuHealth with each new sample of a GPU and the previous
// sample from the same agent process (counters count since the agent started, so a
// sample from another agent is no baseline). A finding drains the GPU: no new work
// lands on it; what runs there keeps running unless FaultEndsWork (the controller then
// stops and requeues it, "gpu-fault"). Rules:
//   - lost: the driver cannot reach the GPU;
//   - XID: a new XID event whose code is not one an application causes by itself
//     (13, 31, 43, 45: its own exception, page fault, hang or preempted cleanup);
//   - ECC: new uncorrectable (double-bit) errors;
//   - temperature at or over the limit.
// Counter increases need a baseline: the first sample of an agent sets it, so a
// controller restart does not drain again for events an admin already handled.
// Only temperature drains lift themselves, once the GPU has cooled to the resume
// temperature; the others wait for an admin (`tessera resume`).
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/agent_protocol.h"

namespace tessera {

struct GpuHealthOptions {
  int temperature_limit_c = 90;
  int temperature_resume_c = 85;
};

enum class HealthKind : uint8_t { kLost, kXid, kEcc, kTemperature };
std::string_view HealthKindName(HealthKind kind);  // "lost", "xid", "ecc", "temperature"
std::optional<HealthKind> ParseHealthKind(std::string_view name);

struct HealthFinding {
  HealthKind kind;
  std::string reason;  // "XID 79 (GPU has fallen off the bus)"
  int xid = 0;         // kXid: the code
};

// Whether a finding ends the work of the jobs on the GPU (they are stopped with the
// preemption signal and requeued, "gpu-fault"), beyond draining it: lost, uncorrectable
// ECC, and XIDs 48 (double-bit ECC), 79 (fallen off the bus), 94 (contained ECC: the
// driver kills the contexts that used the bad memory) and 95 (uncontained ECC: every
// context on the GPU is suspect). Other XIDs (NVLink, GSP, micro-controller events)
// and temperature only drain: the work there may well finish, and a wrong requeue
// costs its progress since the last checkpoint.
bool FaultEndsWork(const HealthFinding& finding);

// The first reason to drain, in the order of the rules above; nullopt when healthy.
std::optional<HealthFinding> CheckGpuHealth(const GpuTelemetry* previous, const GpuTelemetry& now,
                                            const GpuHealthOptions& options);

// Whether an XID is caused by the application rather than the GPU.
bool ApplicationXid(int xid);
// NVIDIA's short description of well-known XIDs; "" for others.
std::string_view XidDescription(int xid);

}  // namespace tessera
