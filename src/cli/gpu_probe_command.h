// `tessera gpu-probe [--nvml LIB | --fake-gpus SPEC] [--samples N] [--interval 1s]
// [--mig-check [--gpu N]...] [--json]`: what the agent would see on this machine
// (agent/gpu/gpu_probe.h). Prints a summary, or the report as JSON; exits 0 when the probe
// is ok, 1 when a check failed, 3 when the driver cannot be loaded, 2 on bad flags.
// Part of `tesserad`, which links the agent.
#pragma once

#include <CLI/CLI.hpp>

namespace tessera {

void AddGpuProbeCommand(CLI::App& app, int* exit_code);

}  // namespace tessera
