#!/usr/bin/env bash
# Before a GPU session, on this machine (where time costs no device minutes): build what dev/cuda/memlab_device.sh
# runs and pack it into build/carry.tar.xz (~7 MB; nvcc needs ~2 of the device's minutes to build it there), with
# the md5 of the sources it was built from, so that the device script takes the binaries only if they match the tree
# it was sent with; and copy ../shared/anchors (fla, titans-pytorch: timed in the same run, never copied from) into
# the git-ignored .anchors/. Then one device call:
#     carry ["build/carry.tar.xz", ".anchors"], command `OUT=$OUT BUDGET=540 bash dev/cuda/memlab_device.sh`
# (the binaries ran there as built here on 2026-11-28: nvcc 13.0 on both, and the device's glibc is newer).
set -eu
cd "$(dirname "$0")/../.."
BINS="train_miras train_miras_fp64 test_miras train_miras_cu memlab memlab_phase build/cluster_check"
SRCS="train_miras.c train_miras.cu test_miras.c dev/cuda/memlab.cu dev/cuda/memlab_v1.cuh dev/cuda/cluster_check.cu"
make -j"$(nproc)" -s $BINS
md5sum $SRCS > build/carry.md5
# build/memlab_base, if there: memlab built from an earlier commit (e.g. `git worktree add /tmp/base REV` and make
# memlab there), the same run's baseline of memlab_device.sh's part 0
BASE=""; [ -x build/memlab_base ] && BASE=build/memlab_base
# CU_BASE=REV: also the GPU trainer of commit REV, built in a worktree (~5 min here), as build/train_miras_cu_base:
# memlab_device.sh's part 10 times titans' whole step with it beside the tree's (the same run's baseline of a change)
if [ -n "${CU_BASE:-}" ]; then
    wt=build/cu_base_src; rm -rf "$wt"; git worktree prune
    git worktree add -q --detach "$wt" "$CU_BASE"
    (cd "$wt" && make -s train_miras_cu) && cp "$wt/train_miras_cu" build/train_miras_cu_base
    git worktree remove --force "$wt"
    echo "build/train_miras_cu_base: train_miras_cu at $(git rev-parse --short "$CU_BASE")"
fi
[ -x build/train_miras_cu_base ] && BASE="$BASE build/train_miras_cu_base"
tar cJf build/carry.tar.xz $BINS $BASE build/carry.md5 build/use_mpi  # (use_mpi: make's stamp, else it rebuilds)
echo "build/carry.tar.xz: $(du -h build/carry.tar.xz | cut -f1) ($BINS)"
if [ -d ../shared/anchors ]; then
    rm -rf .anchors && cp -r ../shared/anchors .anchors && chmod -R u+w .anchors
    # a Triton cache an earlier run returned (run_anchors.sh writes $OUT/triton_cache.tgz; keep it as
    # build/triton_cache.tgz): fla's kernels then need not compile again within the anchor's time limit
    [ -f build/triton_cache.tgz ] && cp build/triton_cache.tgz .anchors/
    echo ".anchors: $(du -sh .anchors | cut -f1) (../shared/anchors$([ -f .anchors/triton_cache.tgz ] && echo ", with build/triton_cache.tgz"))"
else
    echo "no ../shared/anchors: the device run will time no peers"
fi
