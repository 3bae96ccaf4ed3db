#!/usr/bin/env bash
# A one-machine cluster from start to stop: `tessera up` (fake GPUs when the machine
# has none), the four examples of examples/ submitted as tenant team-a, the queue and
# the GPU map while they run, their logs, a check of what each task saw, and a
# clean stop. Exits non-zero if anything is not as it should be.
#
# Usage: scripts/demo.sh [TESSERA_BINARY]     (default: build/tessera)
set -euo pipefail
cd "$(dirname "$0")/.."

bin="$(realpath "${1:-build/tessera}")"
data="$(mktemp -d "${TMPDIR:-/tmp}/tessera-demo.XXXXXX")"
# Tasks run as their tenants' uids: they must be able to pass through to the cluster's data.
chmod 711 "$data"
up_log="$data/up.log"
up_pid=""

stop_cluster() {
  if [[ -n "$up_pid" ]] && kill -0 "$up_pid" 2>/dev/null; then
    kill -TERM "$up_pid"
    for _ in $(seq 1 100); do
      kill -0 "$up_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$up_pid" 2>/dev/null; then
      echo "demo: tessera up did not stop within 10 s; killing it" >&2
      kill -KILL "$up_pid"
    fi
  fi
}
fail() {
  echo "demo: FAILED: $*" >&2
  echo "--- tessera up output:" >&2
  cat "$up_log" >&2 || true
  stop_cluster
  exit 1
}
trap 'stop_cluster' EXIT

echo "== tessera up (data in $data)"
"$bin" up --data "$data/cluster" --listen 127.0.0.1:0 >"$up_log" 2>&1 &
up_pid=$!
url=""
for _ in $(seq 1 300); do
  url="$(sed -n 's/^  API: *//p' "$up_log" | head -1)"
  [[ -n "$url" ]] && break
  kill -0 "$up_pid" 2>/dev/null || fail "tessera up exited"
  sleep 0.1
done
[[ -n "$url" ]] || fail "tessera up did not print its address within 30 s"
cat "$up_log"

export TESSERA_SERVER="$url"
export TESSERA_TOKEN="$(cat "$data/cluster/tokens/team-a.token")"

echo
echo "== submit the examples as tenant team-a"
declare -A ids
for ex in train-gang inference mig-notebook preprocess-cpu; do
  id="$("$bin" submit -f "examples/$ex.yaml")" || fail "submit $ex"
  ids[$ex]="$id"
  echo "submitted examples/$ex.yaml as job $id"
done

echo
echo "== while they run: the queue and the GPU map"
"$bin" wait --for running --timeout 30s "${ids[@]}" >/dev/null || fail "the examples did not start"
"$bin" jobs
echo
"$bin" nodes --gpus
echo
"$bin" queues

echo
echo "== wait for all of them (at most 2 minutes)"
"$bin" wait --timeout 2m "${ids[@]}" || fail "not every example succeeded: $("$bin" jobs --all)"
"$bin" jobs --all

echo
echo "== what the tasks saw (their logs)"
for ex in train-gang inference mig-notebook preprocess-cpu; do
  echo "--- $ex (job ${ids[$ex]}), task 0:"
  "$bin" logs "${ids[$ex]}"
done
echo "--- train-gang, task 1:"
"$bin" logs --task 1 "${ids[train-gang]}"

expect_log() {  # job task regex what
  "$bin" logs --task "$2" "$1" | grep -Eq "$3" || fail "$4 (log of job $1 task $2 lacks /$3/)"
}
g='GPU-[0-9a-fA-F-]+'
expect_log "${ids[train-gang]}" 0 "rank=0 world_size=2 master_addr=127\.0\.0\.1" "gang rank 0 variables"
expect_log "${ids[train-gang]}" 1 "rank=1 world_size=2 master_addr=127\.0\.0\.1" "gang rank 1 variables"
expect_log "${ids[train-gang]}" 0 "cuda_visible_devices=$g(,$g){7}$" "rank 0 sees 8 GPUs"
expect_log "${ids[train-gang]}" 1 "cuda_visible_devices=$g(,$g){7}$" "rank 1 sees 8 GPUs"
expect_log "${ids[train-gang]}" 0 "checkpoint_dir=/.+/${ids[train-gang]}$" "checkpoint directory"
expect_log "${ids[inference]}" 0 "^cuda_visible_devices=$g$" "the share sees one GPU"
expect_log "${ids[inference]}" 0 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25$" "MPS compute share"
expect_log "${ids[inference]}" 0 "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M$" "MPS memory cap"
expect_log "${ids[mig-notebook]}" 0 "cuda_visible_devices=MIG-" "the notebook sees a MIG instance"
expect_log "${ids[preprocess-cpu]}" 0 "^cuda_visible_devices=$" "the CPU job sees no GPU"
# Gang ranks saw different GPUs.
r0="$("$bin" logs "${ids[train-gang]}" | sed -n 's/^cuda_visible_devices=//p')"
r1="$("$bin" logs --task 1 "${ids[train-gang]}" | sed -n 's/^cuda_visible_devices=//p')"
overlap="$(comm -12 <(tr , '\n' <<<"$r0" | sort) <(tr , '\n' <<<"$r1" | sort))"
[[ -z "$overlap" ]] || fail "gang ranks share GPUs: $overlap"

echo
echo "== usage"
"$bin" usage --by job

echo
echo "== stop"
kill -TERM "$up_pid"
rc=0
wait "$up_pid" || rc=$?
up_pid=""
grep -q "tessera up: stopped" "$up_log" || fail "tessera up did not stop cleanly (exit $rc)"
((rc == 0)) || fail "tessera up exited with $rc"
echo "demo: all 4 examples succeeded and saw the right environment; the cluster stopped cleanly"
rm -rf "$data"
