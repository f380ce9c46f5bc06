#!/usr/bin/env bash
# Builds train_miras.cu for the CPU emulator of dev/cuda/emu (no GPU, no CUDA toolkit needed): build/emu/train_miras_emu.
# It runs the real kernels, slowly (one coroutine per CUDA thread): for the small fixtures only.
# usage: dev/cuda/emu_build.sh [extra g++ flags, e.g. -fsanitize=address]
set -eu
cd "$(dirname "$0")/../.."
mkdir -p build/emu
python3 dev/cuda/emu_launch.py train_miras.cu build/emu/train_miras_emu.cpp
g++ -std=c++17 -O1 -g -I. -Idev/cuda/emu -include dev/cuda/emu/cuda_runtime.h -Wno-unknown-pragmas -U_FORTIFY_SOURCE -fopenmp "$@" -o build/emu/train_miras_emu.new build/emu/train_miras_emu.cpp -lm
mv build/emu/train_miras_emu.new build/emu/train_miras_emu   # (atomic: a running check keeps its binary)
echo "built build/emu/train_miras_emu"
