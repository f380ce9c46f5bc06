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
# Exactness is checked at T = 128 (CHECK_T): with random inputs the deep memories' dynamics are chaotic over
# long sequences (a 1e-6 change of k changes y by 20% at T = 512 and by 100% at T = 4096: memlab -x 1), so no
# two float implementations agree there, v1 against the CPU included. The linear memories are checked at 4096.
# Times are taken at T = 4096 (the CPU then checks nothing for the deep memories: -c 0).
CHECK_T=${CHECK_T:-128}
rc=0
for p in $PRESETS; do
    echo "=== $p"
    case $p in deltanet|gated_deltanet|linear_attn) ./memlab -p "$p" -B 4 -H 12 -T 4096 -d 64 -E 4 "$@" || rc=1 ;;
        *) ./memlab -p "$p" -B 4 -H 12 -T "$CHECK_T" -d 64 -E 4 -r 1 "$@" | grep -E "errors|FAIL|cpu" || true
           ./memlab -p "$p" -B 4 -H 12 -T 4096 -d 64 -E 4 -c 0 "$@" || rc=1 ;;
    esac
    echo
done
exit $rc
