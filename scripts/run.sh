#!/usr/bin/env bash
# The main job: set up, build, and run a one-machine cluster (`tessera up`, with fake
# GPUs when the machine has none): submit the four examples of examples/, show the
# queue and the GPU map while they run, check what each task saw, and stop cleanly
# (scripts/demo.sh). The FGD fragmentation experiment is scripts/fgd.sh. At the end it
# prints how to start a cluster of your own, with paths that work from any directory.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset dev >/dev/null
cmake --build build --target tessera
./scripts/demo.sh build/tessera

# `tessera` is not on PATH after a build: name it by its absolute path (unless PATH
# finds this very file), and the examples likewise.
tessera="$PWD/build/tessera"
if [[ "$(command -v tessera 2>/dev/null)" -ef "$tessera" ]]; then
  tessera=tessera
fi
printf -v tessera '%q' "$tessera"
printf -v example '%q' "$PWD/examples/train-gang.yaml"
cat <<MSG

Your own one-machine cluster (Ctrl-C stops it; its data stays in ./tessera-data):
  $tessera up --data tessera-data
then, in another shell in the same directory:
  export TESSERA_SERVER=http://127.0.0.1:7450 TESSERA_TOKEN=\$(cat tessera-data/tokens/team-a.token)
  $tessera submit -f $example
  $tessera jobs; $tessera nodes --gpus; $tessera top
MSG
