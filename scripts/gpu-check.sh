#!/usr/bin/env bash
# The checks for a machine with real NVIDIA GPUs, in one bounded pass, results under
# $OUT (default ./gpu-check-out). It never changes a GPU's mode, clocks or settings.
#   1. NVML: discovery and telemetry samples; on GPUs already in MIG mode, one MIG
#      instance created and destroyed (`tessera gpu-probe --mig-check`).
#   2. The CUDA limiter against a real driver-API program (memory cap, pacing).
#   3. Managed MPS: a share through `tessera up` with the agent's MPS daemon.
#   4. A whole GPU through `tessera up`: a job with the GPU runs CUDA work, a job
#      without one must not reach it.
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (default: build/release)
set -uo pipefail
cd "$(dirname "$0")/.."
build="$(realpath "${1:-build/release}")"
out="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$out"
rc=0
echo "== 1. NVML and MIG (tessera gpu-probe)"
timeout 120 "$build/tessera" gpu-probe --samples 5 --mig-check --json > "$out/gpu-probe.json" 2> "$out/gpu-probe.err" || rc=1
timeout 60 "$build/tessera" gpu-probe --samples 1 --mig-check | tee "$out/gpu-probe.txt" || rc=1
echo "== 2. the CUDA limiter against a real CUDA program"
timeout 240 scripts/gpu-check/limiter_check.sh "$build" "$out" 2>&1 | tee "$out/limiter-check.txt" || rc=1
echo "== 3. managed MPS through tessera up"
OUT="$out" timeout 240 scripts/gpu-check-mps.sh "$build" 2>&1 | tee "$out/mps-check-run.txt" || rc=1
echo "== 4. a whole GPU through tessera up"
timeout 300 scripts/gpu-check/whole_gpu_job.sh "$build" 2>&1 | tee "$out/whole-gpu-job.txt" || rc=1
echo "gpu-check: results in $out (exit $rc)"
exit "$rc"
