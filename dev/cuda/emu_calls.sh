#!/usr/bin/env bash
# Function calls per chunk of the memory kernels at titans' shape (d 64, d_m 256, b 16), counted on the CPU emulator,
# and with a SASS listing the local-memory instructions they cost on the GPU (dev/cuda/memlab_notes.md, "Local memory").
# usage: dev/cuda/emu_calls.sh [SASS_LISTING]     (environment settings pass through, e.g. MIRAS_MEM_PAR=1)
# Builds build/emu/train_miras_emu_calls (the emulator with -finstrument-functions and -DEMU_CALLS: every function
# entry of thread 0 of CTA 0 during a launch is counted), runs the GPU dump of two inputs that differ only in their
# length (T 64 and T 16: 3 chunks apart) and prints dev/cuda/emu_calls.py's difference per chunk. SASS_LISTING:
# `cuobjdump -sass` of `nvcc -O3 -arch=sm_90 -cubin train_miras.cu` (on the GPU machine; not needed for the counts).
set -eu
cd "$(dirname "$0")/../.."
mkdir -p build/emu build/emu/calls
B=build/emu/train_miras_emu_calls
EMU_NAME=train_miras_emu_calls bash dev/cuda/emu_build.sh -DEMU_CALLS -finstrument-functions \
    -finstrument-functions-exclude-file-list=dev/cuda/emu,/usr/ > /dev/null
W=build/emu/calls
for t in 16 64; do
    $B --make-input $W/t$t.bin -p titans -V 256 -D 64 -L 1 -H 1 -E 4 -k 16 -b 1 -t $t -y 7 > /dev/null
    EMU_CALLS=$W/c$t.txt $B -J $W/t$t.bin -O $W/o$t.bin > $W/r$t.out
done
grep -h "^memory:" $W/r64.out || true
if [ $# -gt 0 ]; then
    python3 dev/cuda/sass_local.py "$1" --per-call > $W/local.txt
    python3 dev/cuda/emu_calls.py $B $W/c64.txt $W/c16.txt 3 $W/local.txt
else
    python3 dev/cuda/emu_calls.py $B $W/c64.txt $W/c16.txt 3
fi
