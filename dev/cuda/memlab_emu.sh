#!/usr/bin/env bash
# The kernel lab (dev/cuda/memlab.cu) on the CPU emulator of dev/cuda/emu: checks the versions' logic and
# synchronisation at small shapes without a GPU (its times mean nothing). usage: dev/cuda/memlab_emu.sh [memlab flags]
set -eu
cd "$(dirname "$0")/../.."
mkdir -p build/emu/lab   # its own directory: a copy of train_miras.c beside build/emu/train_miras_emu.cpp would shadow the real one
if [ ! -x build/emu/memlab_emu ] || [ -n "$(find train_miras.cu train_miras.c dev/cuda/memlab.cu dev/cuda/memlab_v1.cuh dev/cuda/emu dev/cuda/emu_launch.py -newer build/emu/memlab_emu | head -n 1)" ]; then
    python3 dev/cuda/emu_launch.py train_miras.cu build/emu/lab/train_miras.cu
    cp train_miras.c build/emu/lab/train_miras.c
    python3 dev/cuda/emu_launch.py dev/cuda/memlab_v1.cuh build/emu/lab/memlab_v1.cuh
    python3 dev/cuda/emu_launch.py dev/cuda/memlab.cu build/emu/lab/memlab.tmp
    sed 's|#include "../../train_miras.cu"|#include "train_miras.cu"|' build/emu/lab/memlab.tmp > build/emu/lab/memlab.cpp
    g++ -std=c++17 -O1 -g -fno-strict-aliasing -I. -Idev/cuda/emu -include dev/cuda/emu/cuda_runtime.h -Wno-unknown-pragmas -U_FORTIFY_SOURCE -fopenmp \
        -o build/emu/memlab_emu build/emu/lab/memlab.cpp -lm
fi
exec build/emu/memlab_emu "$@"
