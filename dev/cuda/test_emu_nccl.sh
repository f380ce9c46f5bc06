#!/usr/bin/env bash
# train_miras.cu's data-parallel path (make train_miras_cu USE_MPI=1) without a GPU: the CUDA emulator's two builds
# of train_miras.cu, plain (build/emu/train_miras_emu) and with USE_MPI (build/emu/train_miras_emu_mpi, NCCL's
# collectives emulated by MPI's on host memory: dev/cuda/emu/nccl.h), through dev/test_mpi.sh's checks under
# mpirun: 2 ranks equal one process with 2x accumulation, checkpoints and resume, refusals, a dying rank, the MPI
# build at world size 1 equal to the plain build (byte-identical checkpoints), ZeRO-1 equal to unsharded. What it
# cannot check: NCCL itself, GPUs. Part of `make ci` (a few minutes); the last line is "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
for t in g++ python3; do
    command -v $t >/dev/null || { echo "# the emulated NCCL checks skipped: no $t"; echo "0 passed, 0 failed"; exit 0; }
done
# the plain build: reused when newer than its sources (make ci's dev/cuda/test_emu_gpu.sh has just built it)
fresh() { for f in train_miras.c train_miras.cu dev/cuda/emu_launch.py dev/cuda/emu/*.h; do [ "$1" -nt "$f" ] || return 1; done; }
if ! fresh build/emu/train_miras_emu && ! bash dev/cuda/emu_build.sh >build/emu_build.log 2>&1; then
    echo "not ok - the emulator build of train_miras.cu failed: $(tail -n 3 build/emu_build.log)"; echo "0 passed, 1 failed"; exit 1
fi
if command -v mpicxx >/dev/null && ! EMU_MPI=1 bash dev/cuda/emu_build.sh >build/emu_build_mpi.log 2>&1; then
    echo "not ok - the emulator's USE_MPI build of train_miras.cu failed: $(tail -n 3 build/emu_build_mpi.log)"; echo "0 passed, 1 failed"; exit 1
fi
# without mpicxx the MPI binary is missing and dev/test_mpi.sh skips every check, counted
[ -x build/emu/train_miras_emu_mpi ] && ! command -v mpicxx >/dev/null && rm -f build/emu/train_miras_emu_mpi
# a smaller model than the CPU test's (the emulator runs every CUDA thread as a coroutine)
PLAIN_BIN=build/emu/train_miras_emu MPI_BIN=build/emu/train_miras_emu_mpi TAG="GPU (emulated NCCL): " \
    MODEL="-p titans -D 16 -L 1 -H 2 -k 4" bash dev/test_mpi.sh
