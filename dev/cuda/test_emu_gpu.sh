#!/usr/bin/env bash
# A subset of `make test_gpu` on the CUDA emulator (no GPU): train_miras.cu built for dev/cuda/emu, then
# dev/test_gpu.sh on the fixtures of the layers written after the H100 run of 2026-11-23 (they have passed on an H200
# since, 2026-11-28; here they keep CI's check of train_miras.cu on machines without a GPU) (the Titans layers MAL, MAG, MAC,
# and attention, whose bf16 mode is also new; the ATLAS family's omega window, poly features, muon and the phi*
# memory; the gated memory with gd, momentum and chunk-level muon; moneta and memora, for the recurrent decoder step
# with the lq and kl retentions, decoded both ways, DECCHUNK): dumps against the CPU, GPU decoding against the
# GPU forward, and bf16 for transformer, mag, omeganet and gated_mom; the checkpointed memory states (one kept in 2,
# and as few as an emulated device with no free memory makes the trainer keep) giving the same dumps for omega_mom,
# omeganet and gated_mom. The trainer's default chunk products (v17's / v18's since run 7 on the H200) apply; the
# fixtures run unsplit (MIRAS_MEM_SPLIT=1: the one-block kernels stay checked, and with the default split over 2 CTAs
# this script took 495 s on the 2-core machine against 463 s unsplit); the split's code (the same for 2 and 4 CTAs)
# is checked on the synthetic inputs below at 4. Part of `make ci` (a few minutes); the
# last line is "N passed, N failed". (Not mag_atlas_pp and mal_atlas: their token-level muon made each a third of this
# script's time, 272 s and 199 s of one core on the 2-core machine; MAG's and MAL's streams, the gated memory, poly and
# muon each have their inputs here, and `make test_gpu_emu` and `make test_gpu` check every fixture, those included.)
set -u
cd "$(dirname "$0")/../.."
for t in g++ python3; do
    command -v $t >/dev/null || { echo "# 282 check(s) skipped: no $t (the emulator build needs g++ and python3)"; echo "0 passed, 0 failed"; exit 0; }
done
if ! bash dev/cuda/emu_build.sh >build/emu_build.log 2>&1; then
    echo "not ok - the emulator build of train_miras.cu failed: $(tail -n 3 build/emu_build.log)"; echo "0 passed, 1 failed"; exit 1
fi
log=build/test_emu_gpu_1.log
# the trainer's MIRAS_* switches take only their listed values, written as whole numbers: anything else is one error
# line with a hint and exit 1 (until 2026-12-03 most were read with atoi, so MIRAS_MEM_TC=abc quietly ran the SIMT
# products and MIRAS_MEM_SPLIT=2x split over 2); 6 checks, a few seconds
ep=0; ef=0
for e in MIRAS_MEM_TC=abc MIRAS_MEM_SPLIT=2x MIRAS_MEM_SPLIT=3 MIRAS_MEM_PAR_FW=no MIRAS_MEM_CKPT=0 MIRAS_DECODE_CHUNK=yes; do
    mode=(-J dev/fixtures/titans.bin -O build/env_bad.bin); [ "${e%%=*}" = MIRAS_DECODE_CHUNK ] && mode=(--decode-test dev/fixtures/titans.bin)
    env "$e" build/emu/train_miras_emu "${mode[@]}" >/dev/null 2>build/env_bad.err; rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <build/env_bad.err)" -eq 1 ] && grep -qF "error: unknown $e (hint: " build/env_bad.err; then
        echo "ok - $e: one error line with a hint, exit 1"; ep=$((ep + 1))
    else echo "FAIL - $e: exit $rc, $(head -c 300 build/env_bad.err)"; ef=$((ef + 1)); fi
done
# the plans' room for a kernel's static shared memory (MEM_STATIC_SMEM): a memory kernel with more stops at its first
# launch with one error line and a hint, exit 1 (the emulator reports EMU_STATIC_SMEM bytes for every kernel); 1 check
EMU_STATIC_SMEM=4000 build/emu/train_miras_emu -J dev/fixtures/titans.bin -O build/env_bad.bin >/dev/null 2>build/env_bad.err; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <build/env_bad.err)" -eq 1 ] && grep -q "^error: memory_forward_kernel has 4000 bytes of static shared memory.*(hint: raise MEM_STATIC_SMEM" build/env_bad.err; then
    echo "ok - a memory kernel over MEM_STATIC_SMEM: one error line with a hint, exit 1"; ep=$((ep + 1))
else echo "FAIL - a memory kernel over MEM_STATIC_SMEM: exit $rc, $(head -c 300 build/env_bad.err)"; ef=$((ef + 1)); fi
log2=build/test_emu_gpu_2.log
# the cluster split of the deep memories (MIRAS_MEM_SPLIT=4; README "The cluster split") on syn_split, the gated
# memory with momentum and the anchor, d = 32 and d_m / 4 = 16 < d (mem_update_backward's rows wider than the slice),
# with the checkpointed states (6 checks, decoding included, by the recurrent step and by the chunk re-run: both
# decoder kernels split alike); it must say that it split, in training and in both decodings (else one failure more:
# the checks would pass on the plain kernels); and syn_split_omega, titans with the omega window (c = 6 over chunks
# of 4: the halo spans two chunks) split alike, whose recurrent step re-takes the halo's gradients per CTA slice (5
# checks), syn_split also with the reads apart from the chain (MIRAS_MEM_PAR=1 at 4 CTAs: 3 checks; moneta, in the
# fixtures' run, unsplit: 3); and syn_titans_d64 (titans at its real head shape, d 64, d_m 256, b 16: the only
# input here whose products are whole 16-row tiles, so the only one where the K-split products and their pairs run
# at once on the two halves of the warps (mm_*_rs's wg, tc_splits_k) are taken: dumps and both decodings), and
# syn_titans_d48w (d 48 in whole 16-row chunks: the products' k in quads over K = 48, the last batch of loads partial:
# dumps and the recurrent decoding), syn_titans_d64 also with the chunk-start state copied into shared memory in
# both chains (MIRAS_MEM_STATE=3: 3 checks; gated_mom and omega_mom, in the fixtures' run, unsplit: 6); and the 16
# inputs at head width 15 (14 for attention; dev/test_gpu.sh: the kernels' scalar paths, not the float4 ones; too
# narrow to split, so they run on the one-block kernels: dumps and decoding, 4 checks each). Small inputs on one
# core: they run beside the fixtures' checks below (which take the other cores), not after them
rm -f build/gpu_test/{log,dec,decc}_syn_split{,_omega}.txt
MIRAS_MEM_SPLIT=4 GPU_BIN=build/emu/train_miras_emu SYNTH=1 JOBS=1 OMP_NUM_THREADS=1 ONLY='^(syn_split|syn_split_omega|syn_titans_d64|syn_titans_d48w|syn_.*_d1[45])$' \
    BF16='^$' CKPT='^syn_split$' CKPT_ENVS="MIRAS_MEM_CKPT=2" PAR='^syn_split$' STATE='^syn_titans_d64$' \
    bash dev/test_gpu.sh > $log2 2>&1 &
split_pid=$!
MIRAS_MEM_SPLIT=1 GPU_BIN=build/emu/train_miras_emu SYNTH=0 JOBS=${JOBS:-$(nproc)} \
    ONLY='^(moneta|memora|mal|mag|mag_gdn|mac|mac_moneta|mac_memora_cw|mac_yaad_cw|mac_muon_gated|mac_muonc|mac_omeganet|mac_omega_lin|mac_lattice|mac_dot|mac_dot_lin|mal_omeganet|mal_lattice|mag_lattice_sim|mal_dot|mag_dt|transformer|omega_gd|omega_mom|omega_linear|poly_linear|poly_mom|omeganet|muon_linear|muonc_linear|gated_gd|gated_mom|gated_chunk|deep_transformer|dot|dot_linear|dot_bound|dt_bound)$' \
    BF16='^(transformer|mag|omeganet|gated_mom)$' CKPT='^(omega_mom|omeganet|gated_mom)$' CKPT_ENVS="MIRAS_MEM_CKPT=2 EMU_MEM_FREE=1" PAR='^moneta$' \
    STATE='^(gated_mom|omega_mom)$' \
    bash dev/test_gpu.sh > $log 2>&1
wait $split_pid
head -n -1 $log; head -n -1 $log2
split_ok() {
    grep -q "^memory: split over clusters of 4 CTAs" build/gpu_test/log_$1.txt 2>/dev/null &&
        grep -q "(the memory split over clusters" build/gpu_test/dec_$1.txt 2>/dev/null &&
        grep -q "(the memory split over clusters" build/gpu_test/decc_$1.txt 2>/dev/null
}
if split_ok syn_split && split_ok syn_split_omega; then
    echo "ok - MIRAS_MEM_SPLIT=4: syn_split and syn_split_omega trained and decoded split"; sp=1; sf=0
else echo "FAIL - MIRAS_MEM_SPLIT=4: syn_split or syn_split_omega did not train and decode split"; sp=0; sf=1; fi
cnt() { tail -n 1 "$1" | grep -oE "^[0-9]+ passed, [0-9]+ failed" | awk -v k=$2 '{print $k}'; }
p1=$(cnt $log 1); f1=$(cnt $log 3); p2=$(cnt $log2 1); f2=$(cnt $log2 3)
[ -n "$p1" ] || { echo "FAIL - the fixtures' run printed no summary"; p1=0; f1=1; }
[ -n "$p2" ] || { echo "FAIL - the split run printed no summary"; p2=0; f2=1; }
echo "$((p1 + p2 + sp + ep)) passed, $((f1 + f2 + sf + ef)) failed"
