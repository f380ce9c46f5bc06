#!/usr/bin/env bash
# The kernel lab (dev/cuda/memlab.cu) on the CPU emulator of dev/cuda/emu: checks the versions' logic and
# synchronisation at small shapes without a GPU (its times mean nothing). usage: dev/cuda/memlab_emu.sh [memlab flags]
# EMU_PHASE=1: the barrier-timing build (make memlab_phase's, for memlab -P 1; the emulator's clock counts thread
# switches, so its cycles only check the plumbing)
set -eu
cd "$(dirname "$0")/../.."
mkdir -p build/emu/lab   # its own directory: a copy of train_miras.c beside build/emu/train_miras_emu.cpp would shadow the real one
bin=build/emu/memlab_emu; defs=""
if [ "${EMU_PHASE:-0}" = 1 ]; then bin=build/emu/memlab_phase_emu; defs=-DMEM_PHASE_TIMING; fi
if [ ! -x $bin ] || [ -n "$(find train_miras.cu train_miras.c dev/cuda/memlab.cu dev/cuda/memlab_v1.cuh dev/cuda/emu dev/cuda/emu_launch.py -newer $bin | head -n 1)" ]; then
    python3 dev/cuda/emu_launch.py train_miras.cu build/emu/lab/train_miras.cu
    cp train_miras.c build/emu/lab/train_miras.c
    python3 dev/cuda/emu_launch.py dev/cuda/memlab_v1.cuh build/emu/lab/memlab_v1.cuh
    python3 dev/cuda/emu_launch.py dev/cuda/memlab.cu build/emu/lab/memlab.tmp
    sed 's|#include "../../train_miras.cu"|#include "train_miras.cu"|' build/emu/lab/memlab.tmp > build/emu/lab/memlab.cpp
    g++ -std=c++17 -O1 -g -fno-strict-aliasing -I. -Idev/cuda/emu -include dev/cuda/emu/cuda_runtime.h $defs -Wno-unknown-pragmas -U_FORTIFY_SOURCE -fopenmp \
        -o $bin.new build/emu/lab/memlab.cpp -lm
    mv $bin.new $bin
fi
exec $bin "$@"
