#!/usr/bin/env bash
# Builds train_miras.cu for the CPU emulator of dev/cuda/emu (no GPU, no CUDA toolkit needed): build/emu/train_miras_emu.
# It runs the real kernels, slowly (one coroutine per CUDA thread): for the small fixtures only.
# usage: dev/cuda/emu_build.sh [extra g++ flags, e.g. -fsanitize=address]
#        EMU_MPI=1 dev/cuda/emu_build.sh: the data-parallel build instead (make train_miras_cu USE_MPI=1's source,
#        built with mpicxx, NCCL's collectives as MPI's on host memory: dev/cuda/emu/nccl.h): build/emu/train_miras_emu_mpi
#        EMU_NAME=NAME: build/emu/NAME instead (a variant built with other flags, e.g. dev/cuda/emu_calls.sh's)
#        EMU_SRC=FILE: that copy of train_miras.cu instead (dev/mutate.py's mutants; its #include "train_miras.c" is
#        the repository's, found by -I.)
set -eu
cd "$(dirname "$0")/../.."
mkdir -p build/emu
name=train_miras_emu; cxx=g++; defs=""
if [ "${EMU_MPI:-0}" = 1 ]; then name=train_miras_emu_mpi; cxx=mpicxx; defs=-DUSE_MPI; fi
name=${EMU_NAME:-$name}
python3 dev/cuda/emu_launch.py "${EMU_SRC:-train_miras.cu}" build/emu/$name.cpp
$cxx -std=c++17 -O${EMU_OPT:-1} -g -I. -Idev/cuda/emu -include dev/cuda/emu/cuda_runtime.h $defs -Wno-unknown-pragmas -U_FORTIFY_SOURCE -fopenmp "$@" -o build/emu/$name.new build/emu/$name.cpp -lm
mv build/emu/$name.new build/emu/$name   # (atomic: a running check keeps its binary)
echo "built build/emu/$name"
