#!/usr/bin/env bash
# The main job: set up, build, and run a one-machine cluster (`tessera up`, with fake
# GPUs when the machine has none): submit the four examples of examples/, show the
# queue and the GPU map while they run, check what each task saw, and stop cleanly
# (scripts/demo.sh). The FGD fragmentation experiment is scripts/fgd.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
cmake --preset dev >/dev/null
cmake --build build --target tessera
./scripts/demo.sh build/tessera
