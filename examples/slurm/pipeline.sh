#!/bin/bash
# A two-step pipeline: training starts only once preprocessing succeeded.
# Usage: ./pipeline.sh [DATA_DIR]   (SBATCH=sbatch runs it under Slurm)
set -euo pipefail
cd "$(dirname "$0")"
sbatch=${SBATCH:-tessera sbatch}

jobid=$($sbatch --parsable pipeline-preprocess.sbatch "${1:-data}")
echo "preprocess: job $jobid"
train=$($sbatch --parsable --dependency=afterok:"$jobid" pipeline-train.sbatch "${1:-data}")
echo "train: job $train (after $jobid succeeds)"
