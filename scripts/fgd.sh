#!/usr/bin/env bash
# Set up, build, and replay the FGD paper's fragmentation experiment
# on the `default` pod list of the Alibaba GPU-sharing trace (six published
# baselines plus Tessera's policy, seeds 42-51), printing the summary table.
# Extra arguments go to `tessera sim fgd` (e.g. --json, --policy fgd,tessera).
set -euo pipefail
cd "$(dirname "$0")/.."

# The trace is in the repository (data/traces); TESSERA_TRACES_DIR points elsewhere.
traces="${TESSERA_TRACES_DIR:-$PWD/data/traces}"
openb="$traces/alibaba-gpu-v2023-fgd"
if [[ ! -f "$openb/openb_node_list_gpu_node.csv" ]]; then
  echo "fgd: the Alibaba trace is not at $openb (data/traces of the repository," \
       "or TESSERA_TRACES_DIR)" >&2
  exit 2
fi
traces="$(cd "$traces" && pwd)"
openb="$traces/alibaba-gpu-v2023-fgd"

./scripts/setup.sh
cmake --preset dev -DTESSERA_TRACES_DIR="$traces" >/dev/null
cmake --build build --target tessera

./build/tessera sim fgd \
  --nodes "$openb/openb_node_list_gpu_node.csv" \
  --pods "$openb/openb_pod_list_default.csv" \
  --policy random,dotprod,gpuclustering,gpupacking,bestfit,fgd,tessera \
  --seeds 42-51 \
  --out out/fgd-default \
  "$@"
