#!/usr/bin/env bash
# One GPU session's checks and timings, in order of value, each under a time guard (total BUDGET seconds, default
# 540): make test_gpu's checks; thread block clusters against the emulator's model; memlab on titans (every version
# checked against the CPU at T = 128, timed at T = 4096); whole training steps of every preset (the README's GPU
# table) and fla's Gated DeltaNet model in the same run (if .anchors/ came along); titans at -f 0, B = 8 and with the
# recompute forced; decode latency; the barrier timing, ncu and the sampled stalls of titans' chunk kernels; the other deep presets in
# memlab; NCCL at world size 1.
# Prepare here first (dev/cuda/device_prep.sh: the binaries, packed, and .anchors/), then one device call:
#     carry ["build/carry.tar.xz", ".anchors"], command `OUT=$OUT BUDGET=540 bash dev/cuda/memlab_device.sh`
# The device tool brings back at most 8 files and the last 12,000 characters of output (run 5 lost test_gpu.log and
# cluster_check's lines to those limits): every log goes into $OUT/logs.tgz, and a summary is printed last.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/device}; mkdir -p "$OUT"; BUDGET=${BUDGET:-540}; S=$SECONDS
W=build/device_logs; rm -rf "$W"; mkdir -p "$W"
SUM=$W/summary.txt
say() { echo "$*" | tee -a "$SUM"; }
finish() {
    tar czf "$OUT/logs.tgz" -C build device_logs 2>/dev/null
    echo; echo "==== summary (total $((SECONDS - S)) s; every log in logs.tgz)"; cat "$SUM"
}
trap finish EXIT
left() { echo $((BUDGET - (SECONDS - S))); }
step() { local t=$1; shift; local l; l=$(left); [ "$l" -gt 5 ] || { say "skipped (no time): $*"; return 1; }; [ "$t" -lt "$l" ] || t=$l; timeout "$t" "$@"; }
export DECODE=0  # bench_gpu.sh's decode latency: once, for titans, below
PARTS=" ${PARTS:-1 2 3 4 5 6 7} "  # the numbered parts below to run (e.g. PARTS="1 3 6"; parts 0, 8, 9, 10 only when named)
part() { case "$PARTS" in *" $1 "*) return 0;; *) return 1;; esac; }
say "$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader) | $(nvcc --version | tail -n 1)"

# the binaries: carried (device_prep.sh) if they match these sources, else built here
BINS="train_miras train_miras_fp64 test_miras train_miras_cu memlab memlab_phase build/cluster_check"
if [ -f build/carry.tar.xz ] && tar xJf build/carry.tar.xz && md5sum -c --quiet build/carry.md5 &&
    ! ldd $BINS 2>&1 | grep -q "not found"; then
    touch $BINS  # (newer than the sources, so that make, e.g. in bench_gpu.sh, keeps them)
    say "binaries: carried (build/carry.tar.xz)"
else
    make -j16 -s $BINS NVCC="nvcc -lineinfo" > "$W/build.log" 2>&1 || { say "build failed"; tail -20 "$W/build.log"; exit 1; }
    say "binaries: built here in $((SECONDS - S)) s"
fi

# 1. the CPU-vs-GPU checks of every fixture and synthetic input, 8 inputs at once (61 s on the H200 in run 5)
if part 1; then
JOBS=8 step 200 bash dev/test_gpu.sh > "$W/test_gpu.log" 2>&1
say "make test_gpu (rc $?): $(tail -n 1 "$W/test_gpu.log")"
grep -E "^FAIL" "$W/test_gpu.log" | head -n 12 | while read -r l; do say "  $l"; done
fi

# 2. thread block clusters: the emulator's model of them (dev/cuda/cluster_check.cu) against the GPU
if part 2; then
for a in "-C 4 -n 300 -g 3" "-C 2 -n 33 -g 2" "-C 8 -n 5 -g 1" "-C 4 -n 4096 -g 132"; do
    say "cluster_check $a: $(step 20 build/cluster_check $a 2>&1 | tail -n 1)"; done
fi

# 3. memlab, titans: every version against the CPU at T = 128, then timed at T = 4096 (run 5, H200: v7 42.4 / 206.3)
if part 3; then
LAB="$W/memlab.log"
step 60 ./memlab -p titans -T 128 -r 1 >> "$LAB" 2>&1; say "memlab titans T=128 (rc $?):"
sed -n '/^version/,$p' "$LAB" | tail -n 7 | while read -r l; do say "  $l"; done
step 60 ./memlab -p titans -r 3 -c 0 >> "$LAB" 2>&1; say "memlab titans T=4096 (rc $?):"
tail -n 7 "$LAB" | while read -r l; do say "  $l"; done
say "t = $((SECONDS - S)) s"
fi

# 0. the versions under test, lean: first v19 and v20 (the cluster split) against the CPU at T = 256 on the five deep
# presets; then titans at T = 4096 timed for v7 (the default's products), v17, v19 with 4 and 2 CTAs per (sequence,
# head), v20, and v7 of the carried build/memlab_base (device_prep.sh: memlab from an earlier commit) as the same run's
# baseline; then titans' whole step (B = 4, T = 4096, -f 2) with MIRAS_MEM_SPLIT=4, 2 and MIRAS_MEM_TC=29 beside
# part 4's default; and decoding at B = 1 with MIRAS_MEM_SPLIT=4 and without (each by the recurrent step, with CUDA
# graphs, and by the chunk re-run)
if part 0; then
    for p in titans ttt_mlp yaad moneta memora; do
        for v in 19 20; do
            step 40 ./memlab -p $p -T 256 -r 1 -c 2 -v $v > "$W/lab0_check.log" 2>&1; rc=$?
            cat "$W/lab0_check.log" >> "$W/lab0.log"
            say "memlab $p T=256 v$v (rc $rc): $(grep -E "^v$v +[0-9.]+ +[0-9.]+ " "$W/lab0_check.log" | tail -n 1)"
        done
    done
    grep -E "^v19 +split:" "$W/lab0.log" | head -n 1 | while read -r l; do say "  $l"; done
    for vs in "7" "17" "19 -S 4" "19 -S 2" "20 -S 4"; do
        step 40 ./memlab -p titans -r 3 -c 0 -v $vs >> "$W/lab0.log" 2>&1; say "memlab titans -v $vs: $(tail -n 1 "$W/lab0.log")"; done
    if [ -x build/memlab_base ]; then
        step 40 build/memlab_base -p titans -r 3 -c 0 -v 7 >> "$W/lab0.log" 2>&1
        say "memlab_base titans: $(tail -n 1 "$W/lab0.log")"
    fi
    for e in "MIRAS_MEM_SPLIT=4" "MIRAS_MEM_SPLIT=2" "MIRAS_MEM_TC=29"; do
        r=$(export $e; PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench.log" | grep -E "^train_miras_cu|failed")
        say "titans $e: ${r:-no result (see bench.log)}"; done
    (export MIRAS_MEM_SPLIT=4; DECODE=1 REF=0 step 90 bash dev/bench_gpu.sh 1 64 2 2 > "$W/decode_split.log" 2>&1)
    grep -E "^decode" "$W/decode_split.log" | while read -r l; do say "titans -f 2 MIRAS_MEM_SPLIT=4: $l"; done
    # (bench_gpu.sh decodes with the recurrent step, with it and CUDA graphs, and with the chunk re-run)
    DECODE=1 REF=0 step 90 bash dev/bench_gpu.sh 1 64 2 2 > "$W/decode_plain.log" 2>&1
    grep -E "^decode" "$W/decode_plain.log" | while read -r l; do say "titans -f 2: $l"; done
    say "t = $((SECONDS - S)) s"
fi

# 4. the README's GPU table: fla's GDN model first (its kernels compile for ~100 s on a fresh machine, and a table
# without the peer's same-run number is half a table), then whole steps of every preset (B = 4, T = 4096, -f 2, the
# 100M models), the linear ones (fla's rivals) and titans first
if part 4; then
if [ -f .anchors/run_anchors.sh ]; then
    OUT=$W step 240 bash .anchors/run_anchors.sh --only fla_gdn_bf16 --budget 200 > "$W/anchors.out" 2>&1
    say "anchors (rc $?):"; tail -n 4 "$W/anchors.out" | while read -r l; do say "  $l"; done
else say "anchors: no .anchors/ (device_prep.sh copies ../shared/anchors there)"; fi
for p in titans gated_deltanet deltanet linear_attn ttt_mlp yaad moneta memora lattice mal mag mac transformer; do
    r=$(PRESET=$p REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench.log" | grep -E "^train_miras_cu|failed")
    say "$p: ${r:-no result (see bench.log)}"; done
say "t = $((SECONDS - S)) s"
fi

# random GPT-2 tokens as an llm.c shard (build/rand_train_000000.bin, N tokens) for parts 5, 7 and 9
rand_shard() {
python3 - build/rand_train_000000.bin "$1" <<'PY'
import random, struct, sys
path, n = sys.argv[1], int(sys.argv[2]); random.seed(0)
h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, n
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *h)); f.write(struct.pack("<%dH" % n, *[random.randrange(50257) for _ in range(n)]))
PY
}

# 10. (prepared 2026-11-28, emulator only) the reads of every chunk apart from the chain (MIRAS_MEM_PAR=1: the
# forward's reads and the backward's reads part in memory_reads_kernel over all chunks at once, the sequential
# kernels without them): titans' whole step with 1, 2 and 4 of its blocks per SM, and with the chain split over 4 CTAs
# (it has less to do per chunk now: more of its time may be the phases' latency, which the split shortens), and
# with the chains' chunk-start state left in global memory (MIRAS_MEM_STATE=0; by default the chains copy it
# into shared memory where the plan without the reads' arrays has room), and (2026-11-29) with the backward chain
# recomputing each chunk's forward values instead of loading those the reads' pass saved (MIRAS_MEM_PAR_FW=0), beside
# the default (first, then the saved values off: the two that matter most if the budget runs short); ncu's duration
# of each memory kernel launch of one step (8 layers' forward, then the backward of layer 7), one pass and with it;
# then the other deep presets with it (memlab_notes "The reads apart from the chain")
if part 10; then
r=$(PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|failed")
say "titans (one pass): ${r:-no result (see bench_par.log)}"
if [ -x build/train_miras_cu_base ]; then  # (device_prep.sh's CU_BASE: the same step by an earlier commit's trainer)
    r=$(CU=build/train_miras_cu_base PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|failed")
    say "titans (one pass), build/train_miras_cu_base: ${r:-no result (see bench_par.log)}"
    # (2026-12-04, dev/notes/gpu.md "The backbone's passes over memory") the backbone's fused passes: gated_deltanet,
    # whose step is a third memory kernels, against the base trainer (which has none of them)
    for cu in ./train_miras_cu build/train_miras_cu_base; do
        r=$(CU=$cu PRESET=gated_deltanet REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|failed")
        say "gated_deltanet, $cu: ${r:-no result (see bench_par.log)}"; done
fi
# the reads apart at their defaults first (lever 1 of memlab_notes' plan, the largest predicted gain), the rest of
# their variants after the local-memory sections below
r=$(export MIRAS_MEM_PAR=1; PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|^memory: the reads|failed")
say "titans MIRAS_MEM_PAR=1: $(echo ${r:-no result (see bench_par.log)})"
# (2026-12-04, second session) the chunk size: b = 64 (-k 64, a quarter of the chunks, each with 4x the rows) at the
# one-pass defaults. If a chunk's time is its chain of phases (runs 7, 8: the split's 1.2x, not 2x), it grows far
# less than 4x and the step runs ~2-3x faster; if it is the work, the step stays where b = 16's is
r=$(FLAGS="-k 64" PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|failed")
say "titans -k 64 (one pass): ${r:-no result (see bench_par.log)}"
# (2026-12-02, memlab_notes "The gradient block; the plan's slots") one pass split over 4, and the chunk-start state
# copied into shared memory in every chain (MIRAS_MEM_STATE=2: where room is left, split 4: the forward's; 3: ahead
# of the rows' arrays, split 4: both chains', split 2: the forward's)
for e in "MIRAS_MEM_SPLIT=4" "MIRAS_MEM_SPLIT=4 MIRAS_MEM_STATE=2" "MIRAS_MEM_SPLIT=4 MIRAS_MEM_STATE=3" "MIRAS_MEM_STATE=3"; do
    r=$(export $e; PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|chunk-start state|failed")
    say "titans (one pass) $e: $(echo ${r:-no result (see bench_par.log)})"; done
[ -f build/rand_train_000000.bin ] || rand_shard $((8 * 4096 + 1))
# (2026-12-02, memlab_notes "Local memory") the local-memory traffic of the trainer's chains: ncu's memory workload
# and warp-state sections of one backward launch (the first: layer 7's) at the one-pass default (right after the
# two steps: it measures the next lever, and the budget may not reach the end of this part)
step 90 ncu --clock-control none --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    -k "regex:memory_backward_kernel" --launch-count 1 ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 \
    -b 4 -t 4096 -x 1 -u 1 -v 0 -g 0 -n 0 -f 2 -i "build/rand_train_*.bin" -j none -z none -o build/par_prof \
    > "$W/ncu_local.txt" 2>&1
say "titans backward launch, local memory (rc $?):"
grep -E "Local Memory Spilling|L1/TEX Hit|Stack Size|Registers Per|Stall Long Scoreboard|Warp Cycles Per Issued" "$W/ncu_local.txt" |
    while read -r l; do say "  $l"; done
for e in "MIRAS_MEM_PAR_FW=0" "MIRAS_MEM_SPLIT=4" "MIRAS_MEM_PAR_CTAS=4" "MIRAS_MEM_PAR_CTAS=1" "MIRAS_MEM_STATE=0"; do
    r=$(export MIRAS_MEM_PAR=1 $e; PRESET=titans REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|^memory: the reads|failed")
    say "titans MIRAS_MEM_PAR=1 $e: $(echo ${r:-no result (see bench_par.log)})"; done
for e in "MIRAS_MEM_PAR=0 x=10" "MIRAS_MEM_PAR=1 x=18"; do
    n=${e##*x=}
    (export ${e% x=*}; step 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw -k "regex:memory_(forward|reads|backward)_kernel" \
        --launch-count $n --log-file "$W/ncu_par_$n.csv" ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 \
        -b 4 -t 4096 -x 1 -u 1 -v 0 -g 0 -n 0 -f 2 -i "build/rand_train_*.bin" -j none -z none -o build/par_prof \
        > "$W/ncu_par_$n.log" 2>&1)
    say "memory kernels of one titans step, ${e% x=*} (rc $?; ms per launch, in order):"
    python3 dev/cuda/ncu_kernels.py "$W/ncu_par_$n.csv" 1 --each 2>&1 | tail -n $((n + 1)) | while read -r l; do say "  $l"; done
done
for p in ttt_mlp yaad moneta memora; do
    r=$(export MIRAS_MEM_PAR=1; PRESET=$p REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench_par.log" | grep -E "^train_miras_cu|failed")
    say "$p MIRAS_MEM_PAR=1: ${r:-no result (see bench_par.log)}"; done
fi

# 5. titans, 100M: -f 0 (3xTF32 memory products), B = 8 (the chunk-start states checkpointed: the trainer prints the
# ck it chose) and B = 4 with ck = 8 forced; then decode at B = 1 next to its floor
if part 5; then
rand_shard $((6 * 8 * 4096 + 1))
for cfg in "0 4 auto" "2 8 auto" "2 4 8"; do set -- $cfg
    ckenv=""; [ "$3" = auto ] || ckenv="MIRAS_MEM_CKPT=$3"
    step 90 env $ckenv ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 -b $2 -t 4096 -x 4 -u 1 -v 0 -g 0 \
        -n 0 -f $1 -i "build/rand_train_*.bin" -j none -z none -o build/bench > "$W/step.log" 2>&1
    say "titans 100M -f $1 B=$2 ck $3 (rc $?): $(grep -E "^memory states" "$W/step.log" | cut -c1-60) $(grep -E "^step" "$W/step.log" | tail -n 1)"
    cat "$W/step.log" >> "$W/steps.log"
done
for f in 2 0; do
    DECODE=1 REF=0 step 90 bash dev/bench_gpu.sh 1 64 2 $f > "$W/decode_f$f.log" 2>&1
    grep -E "^decode" "$W/decode_f$f.log" | while read -r l; do say "titans -f $f: $l"; done; done
say "t = $((SECONDS - S)) s"
fi

# 6. where a chunk's cycles go: block 0's cycles between barriers by the barrier's source line (v7, T = 1024), and
# ncu of the backward and forward (memlab_profile.sh: every section, the L2 bytes, lts__t_bytes over 48 blocks x 16
# chunks at T = 256, and the warp-state samples of the SASS per function and per instruction; run 5 put 55% of the
# backward's time on global loads, place unknown)
if part 6; then
LAB="$W/memlab.log"
step 40 ./memlab_phase -p titans -T 1024 -c 0 -r 1 -v 7 -P 1 > "$W/phase_v7.txt" 2>&1
grep -A 6 -E "^v7 (forward|backward)" "$W/phase_v7.txt" | while read -r l; do say "  $l"; done
OUT=$W step 200 bash dev/cuda/memlab_profile.sh ${PROF_V:-7} titans > "$W/profile.out" 2>&1
grep -hE "lts__t_bytes|dram__bytes|Duration|No Eligible" "$W/details_bac.txt" "$W/details_for.txt" 2>/dev/null |
    while read -r l; do say "  $l"; done
head -n 40 "$W/prof_bac.txt" 2>/dev/null | while read -r l; do say "  $l"; done
for p in ttt_mlp yaad moneta memora; do
    step 40 ./memlab -p $p -r 3 -c 0 -v 7 >> "$LAB" 2>&1; say "memlab $p (rc $?): $(tail -n 1 "$LAB")"; done
fi

# 8. (run 8, after run 7 made the split and v17/v18's products the defaults) the whole steps of titans and
# gated_deltanet, fla's GDN model from the Triton cache run 7 returned (.anchors/triton_cache.tgz, if carried), then
# the other deep presets, each under the defaults (B = 4, T = 4096, -f 2)
if part 8; then
for p in titans gated_deltanet; do
    r=$(PRESET=$p REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench.log" | grep -E "^train_miras_cu|failed")
    say "$p: ${r:-no result (see bench.log)}"; done
if [ -f .anchors/run_anchors.sh ]; then
    OUT=$W step 130 bash .anchors/run_anchors.sh --only fla_gdn_bf16 --budget 95 > "$W/anchors.out" 2>&1  # (30 s to pack the cache)
    say "anchors (rc $?):"; grep -E "^\| fla|restored" "$W/anchors.out" | while read -r l; do say "  $l"; done
fi
for p in ttt_mlp yaad moneta memora mal mag lattice; do
    r=$(PRESET=$p REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | tee -a "$W/bench.log" | grep -E "^train_miras_cu|failed")
    say "$p: ${r:-no result (see bench.log)}"; done
fi

# 9. where a decoder step's time goes (run 7: 2.1 ms for the 103M titans at B = 1, 270 us per layer, against a floor
# of 0.05 ms): the decode lines of bench_gpu.sh (since run 7: the one-row products by gemv_row_kernel), then ncu's duration of every kernel of 4 decoder steps (MIRAS_DECODE_PROFILE: generated tokens 16-19, the
# profiler off before them), summed per kernel name (dev/cuda/ncu_kernels.py); the steps' wall time less the kernels'
# is the launch gaps. ncu serialises the kernels, so the sum is the kernels' own time
if part 9; then
DECODE=1 REF=0 step 90 bash dev/bench_gpu.sh 1 64 2 2 > "$W/decode_plain.log" 2>&1
grep -E "^decode" "$W/decode_plain.log" | while read -r l; do say "titans -f 2: $l"; done
[ -f build/rand_train_000000.bin ] || rand_shard $((8 * 4096 + 1))
for e in "MIRAS_DECODE_CHUNK=0" "MIRAS_DECODE_CHUNK=1"; do
    (export $e MIRAS_DECODE_PROFILE=4; step 150 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum \
        --csv --page raw --log-file "$W/ncu_decode_$e.csv" ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 \
        -b 1 -t 64 -x 1 -u 1 -v 0 -g 40 -n 0 -f 2 -i "build/rand_train_*.bin" -j none -z none -o build/dec_prof \
        > "$W/decode_prof_$e.log" 2>&1)
    say "decode kernels, titans 103M, -f 2, $e (rc $?):"
    python3 dev/cuda/ncu_kernels.py "$W/ncu_decode_$e.csv" 4 2>&1 | head -n 16 | while read -r l; do say "  $l"; done
done
fi

# 7. data parallel (issue 14): world size 1 through NCCL must give the plain build's losses (needs mpirun, nccl.h)
if part 7; then  # (after part 5, which writes build/rand_train_000000.bin)
if command -v mpirun >/dev/null && command -v mpicc >/dev/null && [ -f "$(dirname "$(command -v nvcc)")/../include/nccl.h" ]; then
    cp train_miras_cu build/train_miras_cu_plain
    DP="-p titans -V 50257 -D 64 -L 2 -H 2 -b 2 -t 64 -x 5 -u 1 -v 0 -g 0 -n 0 -i build/rand_train_*.bin -j none -z none"
    if step 120 make -s train_miras_cu USE_MPI=1 >> "$W/build.log" 2>&1; then
        step 30 build/train_miras_cu_plain $DP -o build/dp1 > "$W/dp_plain.log" 2>&1
        step 30 mpirun --allow-run-as-root -np 1 ./train_miras_cu $DP -o build/dp2 > "$W/dp_nccl.log" 2>&1
        a=$(grep -E "^step" "$W/dp_plain.log" | awk '{print $2, $5, $11}'); b=$(grep -E "^step" "$W/dp_nccl.log" | awk '{print $2, $5, $11}')
        if [ -n "$a" ] && [ "$a" = "$b" ]; then say "NCCL world size 1 = plain build: ok ($(echo "$a" | tail -n 1))"
        else say "NCCL world size 1 vs plain: DIFFER"; fi
    else say "NCCL build failed"; fi
    cp build/train_miras_cu_plain train_miras_cu
else say "no mpirun / nccl.h: the NCCL check (issue 14) did not run"; fi
fi
