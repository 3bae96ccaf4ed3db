#!/usr/bin/env bash
# Managed MPS on a GPU machine: `tessera up --gpu-sharing all=shared`, then a quarter
# share capped at 4 GiB that allocates 1 GiB at a time through the driver (the limiter's
# test client, cuda_client), twice: with MPS alone (--cuda-limiter none) and with MPS and
# the CUDA limiter. For each it prints the share's environment, how many GiB it got and
# what cuMemGetInfo said, each GPU's control daemon, and the node's labels; figures go
# as key=value lines to stdout and to $OUT/mps-check.txt when OUT is set.
#
#   --fake   fake GPUs, the fake nvidia-cuda-mps-control and the fake libcuda: checks
#            the wiring on any machine (the fake driver does not enforce MPS limits).
#
# Usage: scripts/gpu-check-mps.sh [--fake] [BUILD_DIR]   (default: build/release)
# Exits non-zero when a share's cap did not hold or the wiring is not as it should be.
set -euo pipefail
cd "$(dirname "$0")/.."

fake=0
if [[ "${1:-}" == "--fake" ]]; then
  fake=1
  shift
fi
build="$(realpath "${1:-build/release}")"
bin="$build/tessera"
client="$build/src/limiter/cuda_client"
fake_cuda="$build/src/limiter/fake_cuda"
for f in "$bin" "$build/tesserad" "$client"; do
  [[ -x "$f" ]] || { echo "mps-check: $f is not built" >&2; exit 2; }
done
report="${OUT:+$OUT/mps-check.txt}"
say() {  # key=value lines
  echo "$*"
  if [[ -n "$report" ]]; then echo "$*" >>"$report"; fi
}

up_args=(--gpu-sharing all=shared)
job_env=""
if ((fake)); then
  up_args=(--fake-gpus 1xH100-80GB:shared --mps-control "$PWD/src/agent/testing/fake-nvidia-cuda-mps-control")
  job_env="env: {LD_LIBRARY_PATH: $fake_cuda}"
elif ! command -v nvidia-cuda-mps-control >/dev/null; then
  say "mps_control=missing"
  echo "mps-check: nvidia-cuda-mps-control is not on PATH: the agent runs shares without MPS" >&2
fi
say "mps_check_mode=$( ((fake)) && echo fake || echo real)"

status=0
up_pid=""
stop_cluster() {
  if [[ -n "$up_pid" ]] && kill -0 "$up_pid" 2>/dev/null; then
    kill -TERM "$up_pid"
    for _ in $(seq 1 150); do
      kill -0 "$up_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$up_pid" 2>/dev/null && kill -KILL "$up_pid"
  fi
  up_pid=""
}
trap 'stop_cluster' EXIT

# One run: $1 the name, the rest extra `tessera up` flags.
run() {
  local name="$1"
  shift
  local data
  data="$(mktemp -d "${TMPDIR:-/tmp}/tessera-mps-check.XXXXXX")"
  chmod 711 "$data"
  "$bin" up --data "$data/cluster" --listen 127.0.0.1:0 "${up_args[@]}" "$@" >"$data/up.log" 2>&1 &
  up_pid=$!
  local url=""
  for _ in $(seq 1 300); do
    url="$(sed -n 's/^  API: *//p' "$data/up.log" | head -1)"
    [[ -n "$url" ]] && break
    kill -0 "$up_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z "$url" ]]; then
    cat "$data/up.log" >&2
    say "${name}_error=tessera up did not start"
    status=1
    stop_cluster
    return
  fi
  export TESSERA_SERVER="$url"
  TESSERA_TOKEN="$(cat "$data/cluster/tokens/team-a.token")"
  export TESSERA_TOKEN
  cat >"$data/share.yaml" <<EOF
name: mps-check-$name
resources: {gpus: 1, gpu_fraction: 0.25, gpu_memory: 4GiB, cpu: 1, memory: 1GiB}
$job_env
command:
  - /bin/sh
  - -c
  - |
    env | grep -E '^(CUDA_MPS_|TESSERA_CUDA_|LD_PRELOAD=|CUDA_VISIBLE_DEVICES=)' | sort
    exec $client alloc alloc dlsym 8
EOF
  local id
  id="$("$bin" submit -f "$data/share.yaml")"
  "$bin" wait --timeout 2m "$id" >/dev/null || true
  local log
  log="$("$bin" logs "$id" || true)"
  echo "--- $name: the share's log"
  echo "$log"
  local allocated total pipe preload
  allocated="$(sed -n 's/^allocated=//p' <<<"$log" | head -1)"
  total="$(sed -n 's/^info_total_mib=//p' <<<"$log" | head -1)"
  pipe="$(sed -n 's/^CUDA_MPS_PIPE_DIRECTORY=//p' <<<"$log" | head -1)"
  preload="$(sed -n 's/^LD_PRELOAD=//p' <<<"$log" | head -1)"
  say "${name}_allocated_gib=${allocated:-none}"
  say "${name}_meminfo_total_mib=${total:-none}"
  say "${name}_first_failure_code=$(sed -n 's/^failure_code=//p' <<<"$log" | head -1)"
  say "${name}_mps_pipe=${pipe:-none}"
  say "${name}_ld_preload=$preload"
  echo "--- $name: the agent's MPS status"
  cat "$data/cluster/agent/mps/status" 2>/dev/null || echo "(none)"
  local daemons
  daemons="$(ls "$data"/cluster/agent/mps/*/pipe/nvidia-cuda-mps-control.pid 2>/dev/null | wc -l)"
  say "${name}_daemons=$daemons"
  say "${name}_labels=$("$bin" nodes | awk 'NR == 2 {print}' | grep -oE '(cuda-limiter|mps)=[a-z]+' | paste -sd, -)"
  # The checks: the cap held (fewer than the 8 GiB asked), and the wiring is there.
  if [[ -z "$allocated" ]]; then
    say "${name}_verdict=FAILED: the share printed no result"
    status=1
  elif { ((fake)) || command -v nvidia-cuda-mps-control >/dev/null; } &&
    [[ -z "$pipe" || "$daemons" -lt 1 ]]; then
    say "${name}_verdict=FAILED: no MPS daemon or no pipe directory in the share's environment"
    status=1
  elif [[ "$name" == "limiter" && "$preload" != *libtessera_cuda_limiter.so* ]]; then
    say "${name}_verdict=FAILED: the limiter is not in the share's LD_PRELOAD"
    status=1
  elif [[ "$name" == "limiter" || $fake -eq 0 ]] && ((allocated > 4)); then
    say "${name}_verdict=FAILED: the 4 GiB cap did not hold ($allocated GiB)"
    status=1
  elif [[ "$name" == "limiter" && "${total:-0}" != "4096" ]]; then
    say "${name}_verdict=FAILED: cuMemGetInfo says $total MiB, not 4096"
    status=1
  else
    say "${name}_verdict=ok"
  fi
  stop_cluster
  grep -E "MPS|limiter" "$data/up.log" || true
  rm -rf "$data"
}

run mps_only --cuda-limiter none
run limiter
exit "$status"
