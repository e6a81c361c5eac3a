#!/usr/bin/env bash
# Build every planted case: <case>/planted.cu -> <case>/planted, with the same flags the suite documents.
# Stops at the first failure. Usage: bash examples/planted/build.sh   (NVCC=... to pick a compiler)
set -euo pipefail
cd "$(dirname "$0")"
NVCC="${NVCC:-nvcc}"
for dir in [0-9][0-9]-*/; do
    dir="${dir%/}"
    echo "building ${dir}"
    (cd "$dir" && "$NVCC" -O3 -arch=sm_90 -lineinfo -o planted planted.cu)
done
echo "built $(ls -d [0-9][0-9]-*/ | wc -l) cases"
