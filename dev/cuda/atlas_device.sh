#!/usr/bin/env bash
# The ATLAS family on a real GPU (issue 12), one device call (after dev/cuda/memlab_device.sh, which builds): every
# ATLAS fixture and synthetic input through `make test_gpu`'s checks (dumps against the CPU, GPU decoding, bf16), then
# the comparison rows the CPU could not afford (atlas_pp: token-level muon with the gated memory, over 2 hours of one
# core for its text run) by the GPU trainer, with dev/compare_miras.sh's sizes and steps. Each step under a time guard
# (total BUDGET seconds, default 590).
# usage: OUT=dir TS=build/ts.txt dev/cuda/atlas_device.sh   (TS: tinyshakespeare.txt copied into the checkout, carried)
#        MQ8K="atlas atlas_pp" SEEDS="1337 7 3" OUT=dir dev/cuda/atlas_device.sh: instead, the README's 8,000-step
#        MQAR (three seeds) for those presets with the GPU trainer, as many runs as the budget allows (MQ_FLAGS="-X 1":
#        extra flags for every run, e.g. the README's atlas `-X 1` rows; a later call;
#        its dry run: MQ8K=titans SEEDS=7 MQ_STEPS=2 CMP_BIN=build/emu/train_miras_emu, ~1 min; muon is too slow there)
# A dry run without a GPU (checks this script's plumbing, not the GPU): GPU_BIN=build/emu/train_miras_emu
# CMP_BIN=build/emu/train_miras_emu ONLY='^(omega_gd)$' PRESETS=titans TS_STEPS=2 MQ_STEPS=2 BUDGET=3000 (after
# dev/cuda/emu_build.sh); GPU_BIN and ONLY pass through to dev/test_gpu.sh.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-build/device}; mkdir -p "$OUT"; BUDGET=${BUDGET:-590}; S=$SECONDS
left() { echo $((BUDGET - (SECONDS - S))); }
step() { local t=$1; shift; local l; l=$(left); [ "$l" -gt 5 ] || { echo "skipped (no time): $*"; return 1; }; [ "$t" -lt "$l" ] || t=$l; timeout "$t" "$@"; }
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), commit $(git rev-parse --short HEAD 2>/dev/null)"
step 200 make -s train_miras train_miras_cu test_miras data_prep > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -n 5 "$OUT/build.log"; exit 1; }
echo "t = $((SECONDS - S)) s"
if [ -n "${MQ8K:-}" ]; then  # the 8,000-step MQAR of README "ATLAS family" (compare_miras.sh's MQAR line, -x 8000)
    d=build/mq8k_gpu; mkdir -p $d
    [ -f $d/mqar_tokenizer.bin ] || data_prep/synth mqar -o $d/mqar -V 64 -T 16 -k 4 -q 4 -n 20000 -m 512 > /dev/null
    for p in $MQ8K; do
        for y in ${SEEDS:-1337 7 3}; do
            step 590 "${CMP_BIN:-./train_miras_cu}" -p "$p" ${MQ_FLAGS:-} -D 64 -L 2 -H 2 -E 2 -k 16 -g 0 -n 0 -V 64 -b 4 -t 16 \
                -x "${MQ_STEPS:-8000}" -v 2000 -m 32 -l 3e-3 -u 100 -y "$y" -i "$d/mqar_train_*.bin" \
                -j "$d/mqar_val_*.bin" -z $d/mqar_tokenizer.bin -o "$d/mq_${p}_y$y" > "$OUT/mq_${p}_y$y.log" 2>&1
            echo "$p seed $y: rc $?, $(grep 'answer accuracy' "$OUT/mq_${p}_y$y.log" | tail -n 1)"
        done
    done
    echo "total $((SECONDS - S)) s"; exit 0
fi
atlas='^(omega_.*|poly_.*|omeganet|muon.*|gated_.*|atlas.*|deep_transformer|dot.*|dt_bound|syn_(omega.*|omeganet|poly_dn|atlas.*|gated.*|dt|dot.*|phi_.*))$'
step 240 env ONLY="${ONLY:-$atlas}" bash dev/test_gpu.sh > "$OUT/test_gpu_atlas.log" 2>&1
echo "test_gpu, the ATLAS family: rc $?"; grep -vE "^ok|^===" "$OUT/test_gpu_atlas.log" | tail -n 20
echo "t = $((SECONDS - S)) s"
ts=${TS:-build/ts.txt}
if [ -f "$ts" ]; then
    step 320 env BIN="${CMP_BIN:-./train_miras_cu}" TS="$ts" PRESETS="${PRESETS:-atlas_pp}" TS_STEPS="${TS_STEPS:-150}" \
        MQ_STEPS="${MQ_STEPS:-2000}" \
        bash dev/compare_miras.sh build/cmp_gpu > "$OUT/compare.md" 2>&1
    echo "compare_miras.sh on the GPU: rc $?"; cat "$OUT/compare.md"; cp build/cmp_gpu/*.log "$OUT/" 2>/dev/null
else echo "no $ts: the comparison rows did not run (copy ../shared/data/tinyshakespeare.txt there and carry it)"; fi
echo "total $((SECONDS - S)) s"
