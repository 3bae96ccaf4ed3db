#!/usr/bin/env bash
# The controller's CPU per job in the one-by-one phase of bench/cluster_throughput.py:
# tesserad's utime + stime (/proc/PID/stat) from its first task launch until it exits,
# divided by the jobs. Steadier than jobs/s on a shared machine (a run's wall time moves
# with whatever else runs; its CPU much less), so old/new comparisons report it beside
# the throughput. Each job is its own `tessera submit` process, as in the phase itself.
#
# Usage: bench/daemon_cpu_per_job.sh BUILD_DIR [JOBS] [RUNS]
#   BUILD_DIR  a build directory holding tessera and tesserad (e.g. build/ci)
#   JOBS       one-GPU jobs per run (default 1500); RUNS: runs (default 3)
# Prints one line per run: cpu_ms_per_job, the controller's CPU seconds, wall seconds and
# the phase's jobs/s as cluster_throughput.py printed it.
set -uo pipefail

build=$(cd "${1:?usage: $0 BUILD_DIR [JOBS] [RUNS]}" && pwd)
jobs=${2:-1500}
runs=${3:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
hz=$(getconf CLK_TCK)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

cpu_ticks() {  # utime + stime of PID, in clock ticks
  local st
  { read -r -a st < "/proc/$1/stat"; } 2>/dev/null || return 1
  echo $(( st[13] + st[14] ))
}

for run in $(seq 1 "$runs"); do
  python3 "$src/bench/cluster_throughput.py" --tessera "$build/tessera" --phases one-by-one \
    --jobs "$jobs" --runs 1 > "$log" 2>&1 &
  bench=$!
  daemon=""
  for _ in $(seq 1 600); do  # tessera up execs tesserad as the bench's child
    for child in $(pgrep -P "$bench"); do
      [ "$(cat "/proc/$child/comm" 2>/dev/null)" = tesserad ] && daemon=$child
    done
    [ -n "$daemon" ] && break
    sleep 0.1
  done
  if [ -z "$daemon" ]; then
    echo "run $run: no tesserad under the bench (see its output)"; cat "$log"; wait "$bench"; exit 1
  fi
  for _ in $(seq 1 3000); do  # the first job's shim: the phase has begun
    [ -n "$(pgrep -P "$daemon")" ] && break
    sleep 0.02
  done
  start=$(cpu_ticks "$daemon") || start=0
  t0=$(date +%s.%N)
  last=$start
  while now=$(cpu_ticks "$daemon"); do
    last=$now
    sleep 0.2
  done
  t1=$(date +%s.%N)
  wait "$bench"
  rate=$(grep -m1 -E "^one-by-one" "$log" | awk '{print $2}')
  python3 -c "import sys; s=($last-$start)/$hz; print(f'run $run: cpu_ms_per_job {1000*s/$jobs:.2f}  controller_cpu_s {s:.2f}  wall_s {$t1-$t0:.1f}  jobs_per_s ${rate:-?}')"
done
