#!/usr/bin/env bash
# The kernel lab of the memory on a GPU (dev/cuda/memlab.cu): builds ./memlab and runs every version of the memory
# kernels at the issue's shapes, one table per preset (version, fwd ms, bwd ms, max rel err vs the CPU).
#   dev/cuda/memlab.sh                    all presets below
#   PRESETS="titans deltanet" dev/cuda/memlab.sh -r 3     some, with memlab's flags added to each
# Shapes: the 100M models (B=4, T=4096, H=12, d=64; deep memories E=4 so dm=256, b=16; deltanet and
# gated_deltanet b=1, linear_attn b=16). The emulator runs the same lab at small shapes: dev/cuda/memlab_emu.sh.
set -u
cd "$(dirname "$0")/../.."
make -s memlab NVCC="${NVCC:-nvcc}" || { echo "memlab: build failed"; exit 1; }
PRESETS=${PRESETS:-"titans deltanet gated_deltanet linear_attn ttt_mlp moneta yaad memora"}
rc=0
for p in $PRESETS; do
    echo "=== $p"
    ./memlab -p "$p" -B 4 -H 12 -T 4096 -d 64 -E 4 "$@" || rc=1
    echo
done
exit $rc
