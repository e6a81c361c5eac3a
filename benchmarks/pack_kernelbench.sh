#!/usr/bin/env bash
# Pack KernelBench's problem files (levels 1-3) at a pinned commit into .whl/kernelbench/, the folder carried
# to the GPU machine, for benchmarks/kernelbench_sweep.py and `kernelscope bench` there.
#
#   git clone https://github.com/ScalingIntelligence/KernelBench KB     # once, anywhere
#   ../shared/device/wheels.sh gpu                                       # first: it empties .whl/
#   benchmarks/pack_kernelbench.sh KB                                    # then this (about 1 MiB)
#
# The default commit, 0d1222636478e6c238dc9886b6ba4be975b22efe, is the one whose tolerances the `kernelbench`
# policy follows (harness/correctness.py). Only the problem modules are copied (git archive), nothing of
# KernelBench's code; the commit is written to .whl/kernelbench/COMMIT.
set -euo pipefail
checkout=${1:?usage: benchmarks/pack_kernelbench.sh KERNELBENCH_CHECKOUT [COMMIT] [LEVELS]}
commit=${2:-0d1222636478e6c238dc9886b6ba4be975b22efe}
levels=${3:-"1 2 3"}
dest=.whl/kernelbench
git -C "$checkout" cat-file -e "$commit^{commit}" || { echo "commit $commit is not in $checkout (fetch it)" >&2; exit 2; }
rm -rf "$dest" && mkdir -p "$dest"
paths=()
for l in $levels; do paths+=("KernelBench/level$l"); done
git -C "$checkout" archive "$commit" "${paths[@]}" | tar -x -C "$dest"
echo "$commit" > "$dest/COMMIT"
echo "packed $(find "$dest" -name '*.py' | wc -l) problems of KernelBench $commit into $dest ($(du -sh "$dest" | cut -f1))"
