#!/usr/bin/env bash
# Old/new comparison of three benchmarks, run alternately in one sitting so that both
# builds see the same machine (a shared 2-core VM varies by up to a third over a quarter
# of an hour, docs/benchmarks.md):
#
#   cluster_throughput   bench/cluster_throughput.py (tessera up, 8 fake GPUs): jobs/s of
#                        the one-by-one, drain, mixed and array phases, one run each
#   launch_latency       bench/launch_latency_bench: decision -> exec and exit -> next
#                        exec p50/p99, idle and backlog
#   agent_scale          bench/agent_scale_bench --agents 1000: join, controller CPU and
#                        RSS, API and heartbeat latency, jobs/s, re-registration
#
# Each round runs every benchmark as a pair, old then new (ORDER=abba: new first in even
# rounds), ROUNDS rounds. Each run's figures are printed with their label as it ends,
# its raw output saved under OUT, and a summary (each run and the median per side) ends.
#
# Usage:
#   bench/compare_old_new.sh OLD_BUILD NEW_BUILD [OLD_SRC [NEW_SRC]]
# e.g.
#   OUT=/tmp/bench-compare bench/compare_old_new.sh /tmp/bench-old/build/ci /tmp/bench-new/build/ci
#
# OLD_BUILD, NEW_BUILD  build directories, each holding tessera, tesserad,
#                       bench/launch_latency_bench and bench/agent_scale_bench (configure
#                       with -DTESSERA_BUILD_BENCH=ON; the ci preset turns it off). Note
#                       that agent_scale_bench runs the tesserad whose path was compiled
#                       into it, which this script prints.
# OLD_SRC, NEW_SRC      source trees whose bench/cluster_throughput.py runs against each
#                       build's tessera (default: the build's CMAKE_HOME_DIRECTORY).
# Environment (defaults sized for about 15-20 minutes in all on a 2-core machine):
#   OUT=/tmp/bench-compare  ROUNDS=3  ORDER=fixed|abba  REST_S=0 (idle before each run)
#   CT_ARGS="--jobs 2000 --mixed 1000"  (cluster_throughput.py; --runs 1 --keep are added)
#   LL_ARGS="--jobs 400 --backlog 2000"
#   AS_ARGS="--agents 1000 --steady-s 30 --jobs 4000"
#   RUN_TIMEOUT_S=400      (a run that takes longer is killed and marked failed)
# Each run took, on 2 cores with a build running beside at nice 5 (load 4-6):
# cluster_throughput 85-100 s, launch_latency 30 s, agent_scale 40 s; 3 rounds of pairs,
# about 15-17 minutes (less on an idle machine; twice as long under a -j2 build at load
# 9-11, where launch latency's figures are meaningless). Run it with nothing else running.
set -uo pipefail

OLD_BUILD=${1:-${OLD_BUILD:-}}
NEW_BUILD=${2:-${NEW_BUILD:-}}
if [[ -z "$OLD_BUILD" || -z "$NEW_BUILD" ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
OLD_BUILD=$(realpath "$OLD_BUILD")
NEW_BUILD=$(realpath "$NEW_BUILD")
source_of() { sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt"; }
OLD_SRC=$(realpath "${3:-${OLD_SRC:-$(source_of "$OLD_BUILD")}}")
NEW_SRC=$(realpath "${4:-${NEW_SRC:-$(source_of "$NEW_BUILD")}}")
OUT=${OUT:-/tmp/bench-compare}
ROUNDS=${ROUNDS:-3}
ORDER=${ORDER:-fixed}
REST_S=${REST_S:-0}
CT_ARGS=${CT_ARGS:---jobs 2000 --mixed 1000}
LL_ARGS=${LL_ARGS:---jobs 400 --backlog 2000}
AS_ARGS=${AS_ARGS:---agents 1000 --steady-s 30 --jobs 4000}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-400}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
KEPT="$OUT/.kept-dirs"  # cluster_throughput's data, removed only at the end (freed inodes
: >"$KEPT"              # slow the next run's file creations on ext4, docs/benchmarks.md)

build_of() { [[ $1 == old ]] && echo "$OLD_BUILD" || echo "$NEW_BUILD"; }
src_of() { [[ $1 == old ]] && echo "$OLD_SRC" || echo "$NEW_SRC"; }

# What is compared, and a warning where a bench binary is older than the tesserad beside it.
{
for side in old new; do
  b=$(build_of $side) s=$(src_of $side)
  for f in tessera tesserad bench/launch_latency_bench bench/agent_scale_bench; do
    [[ -x "$b/$f" ]] || { echo "missing $b/$f" >&2; exit 1; }
  done
  [[ -f "$s/bench/cluster_throughput.py" ]] || { echo "missing $s/bench/cluster_throughput.py" >&2; exit 1; }
  for f in bench/launch_latency_bench bench/agent_scale_bench; do
    [[ "$b/$f" -ot "$b/tesserad" ]] && echo "WARNING: $b/$f is older than $b/tesserad (stale?)" >&2
  done
  echo "$side: build $b, source $s ($(git -C "$s" log -1 --format='%h %s' 2>/dev/null | cut -c1-70))"
  echo "$side: agent_scale_bench runs $(grep -aom1 '/[[:graph:]]*/tesserad' "$b/bench/agent_scale_bench")"
done
echo "rounds $ROUNDS, order $ORDER; CT_ARGS='$CT_ARGS' LL_ARGS='$LL_ARGS' AS_ARGS='$AS_ARGS'"
}

# The key figures of one raw output.
figures() {
  case $1 in
    cluster_throughput) sed -n 's/^run [0-9]* *[a-z]* *//p' "$2" ;;
    launch_latency) awk '/^(idle|backlog) \(/ {ph = $1}
      /p50/ {name = $0; sub(/^ +/, "", name); sub(/ +n=.*/, "", name)
             match($0, /p50 +[0-9.]+/); p50 = substr($0, RSTART + 4, RLENGTH - 4); gsub(/ /, "", p50)
             match($0, /p99 +[0-9.]+/); p99 = substr($0, RSTART + 4, RLENGTH - 4); gsub(/ /, "", p99)
             printf "%s %s p50/p99 %s/%s ms; ", ph, name, p50, p99} END {print ""}' "$2" ;;
    agent_scale) grep -E '^\| [0-9]+ \|' "$2" ;;
  esac
}

run_one() {  # side round bench
  local side=$1 round=$2 bench=$3 b s raw start rc load
  b=$(build_of "$side") s=$(src_of "$side")
  raw="$OUT/$bench.$side.r$round.txt"
  sleep "$REST_S"
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "# $side round $round $bench, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >"$raw"
  start=$SECONDS
  case $bench in
    cluster_throughput)
      # shellcheck disable=SC2086
      timeout -k 10 "$RUN_TIMEOUT_S" python3 "$s/bench/cluster_throughput.py" --tessera "$b/tessera" \
        $CT_ARGS --runs 1 --keep >>"$raw" 2>&1 ;;
    launch_latency)
      # shellcheck disable=SC2086
      timeout -k 10 "$RUN_TIMEOUT_S" "$b/bench/launch_latency_bench" $LL_ARGS >>"$raw" 2>&1 ;;
    agent_scale)
      # shellcheck disable=SC2086
      timeout -k 10 "$RUN_TIMEOUT_S" "$b/bench/agent_scale_bench" $AS_ARGS >>"$raw" 2>&1 ;;
  esac
  rc=$?
  sed -n 's/^left //p' "$raw" >>"$KEPT"
  printf '[round %s] %-3s %-18s %4d s (load %s)  %s\n' "$round" "$side" "$bench" $((SECONDS - start)) "$load" \
    "$([[ $rc == 0 ]] && figures "$bench" "$raw" || echo "FAILED rc=$rc, see $raw")" | tee -a "$OUT/runs.txt"
}

: >"$OUT/runs.txt"
begin=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
  sides="old new"
  [[ $ORDER == abba && $((round % 2)) == 0 ]] && sides="new old"
  for bench in cluster_throughput launch_latency agent_scale; do
    for side in $sides; do
      run_one "$side" "$round" "$bench"
    done
  done
done
echo "all runs: $(((SECONDS - begin) / 60)) min $(((SECONDS - begin) % 60)) s"
xargs -r rm -rf <"$KEPT"

# Summary: every figure per side, each round's value and the median, and new/old.
python3 - "$OUT" "$ROUNDS" <<'EOF' | tee "$OUT/summary.txt"
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def parse(bench, text):
    f = {}
    if bench == "cluster_throughput":
        for line in text.splitlines():
            if line.startswith("run "):
                for k, v in re.findall(r"([a-z-]+)\s+([\d.]+) jobs/s", line):
                    f[k + " jobs/s"] = float(v)
                m = re.search(r"p50 ([\d.]+) ms, p99 ([\d.]+) ms", line)
                if m:
                    f["submit p50 ms"], f["submit p99 ms"] = map(float, m.groups())
    elif bench == "launch_latency":
        phase = None
        for line in text.splitlines():
            m = re.match(r"(idle|backlog) \(", line)
            if m:
                phase = m.group(1)
            m = re.match(r"\s+(\S.*?\S)\s+n=\d+\s+p50\s+([\d.]+) ms\s+p90\s+([\d.]+) ms\s+p99\s+([\d.]+) ms", line)
            if m and phase:
                f[f"{phase} {m.group(1)} p50 ms"] = float(m.group(2))
                f[f"{phase} {m.group(1)} p99 ms"] = float(m.group(4))
    else:
        head = None
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| agents"):
                head = cells
            elif head and re.match(r"\| \d+ \|", line) and len(cells) == len(head):
                for name, cell in zip(head[1:], cells[1:]):
                    parts = [p for p in re.findall(r"[\d.]+", cell.split("(")[0])]
                    if " / " in name:  # "x p50 / p99": two figures
                        base = name.split(" p50")[0]
                        for q, v in zip(("p50", "p99"), parts):
                            f[f"{base} {q}"] = float(v)
                    elif parts:
                        f[name] = float(parts[0])
    return f

for bench in ("cluster_throughput", "launch_latency", "agent_scale"):
    data = {}
    for side in ("old", "new"):
        for r in range(1, rounds + 1):
            try:
                text = open(f"{out}/{bench}.{side}.r{r}.txt").read()
            except OSError:
                continue
            for k, v in parse(bench, text).items():
                data.setdefault(k, {"old": [], "new": []})[side].append(v)
    print(f"\n{bench}: figure, old runs (median), new runs (median), new/old")
    for k, s in data.items():
        med = {x: statistics.median(s[x]) if s[x] else None for x in s}
        ratio = f"{med['new'] / med['old']:.2f}" if med["old"] and med["new"] else "-"
        cols = [" ".join(f"{v:g}" for v in s[x]) + (f" ({med[x]:g})" if s[x] else "")
                for x in ("old", "new")]
        print(f"  {k:34s} {cols[0]:28s} {cols[1]:28s} {ratio}")
EOF
echo "raw outputs in $OUT"
