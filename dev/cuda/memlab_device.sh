#!/usr/bin/env bash
# Everything worth learning from one short GPU session about the memory kernels, in order of value, each step
# under a time guard (total budget BUDGET seconds, default 540): build; memlab on titans at T=128 (every version
# checked against the CPU) and at T=4096 (timed); make test_gpu (the CPU-vs-GPU checks); the WY chunk kernels of the
# b = 1 delta rule against v6 (memlab, whole steps, ncu); whole training steps of the 100M titans with the SIMT,
# TF32 and 3xTF32 memory products; its decode latency; ncu of the tensor-core backward; memlab on the other deep
# presets; whole steps of every preset (bench_gpu.sh); NCCL at world size 1 against the plain build; the anchors (fla,
# titans-pytorch) if .anchors/ is there.
# (and first, a few seconds: thread block clusters against the emulator's model of them, dev/cuda/cluster_check.cu)
# usage: OUT=dir dev/cuda/memlab_device.sh      (logs go to $OUT, default build/device)
# (the device tool brings back only a few files: keep what matters in the printed summary and in few files)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/device}; mkdir -p "$OUT"; BUDGET=${BUDGET:-590}; S=$SECONDS
export DECODE=0  # bench_gpu.sh's decode latency: once, for titans, below
left() { echo $((BUDGET - (SECONDS - S))); }
step() { local t=$1; shift; local l; l=$(left); [ "$l" -gt 5 ] || { echo "skipped (no time): $*"; return 1; }; [ "$t" -lt "$l" ] || t=$l; timeout "$t" "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
nvcc --version | tail -n 1 | tee -a "$OUT/device.txt"
make -j8 -s memlab memlab_phase train_miras_cu train_miras train_miras_fp64 test_miras NVCC="nvcc -lineinfo" > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -20 "$OUT/build.log"; exit 1; }
echo "build: $((SECONDS - S)) s"
# thread block clusters: the emulator's model of them (dev/cuda/cluster_check.cu) against the GPU, a few seconds
if step 60 make -s build/cluster_check >> "$OUT/build.log" 2>&1; then
    for a in "-C 4 -n 300 -g 3" "-C 2 -n 33 -g 2" "-C 8 -n 5 -g 1" "-C 4 -n 4096 -g 132"; do step 20 build/cluster_check $a; done
else echo "cluster_check: build failed"; fi
LAB="$OUT/memlab.log"
step 60 ./memlab -p titans -T 128 -r 1 >> "$LAB" 2>&1; echo "== titans T=128 check (rc $?)"; sed -n '/^version/,$p' "$LAB" | tail -n 8
step 60 ./memlab -p titans -r 3 -c 0 >> "$LAB" 2>&1; echo "== titans T=4096 (rc $?)"; tail -n 8 "$LAB"
# the CPU-vs-GPU checks of every fixture and synthetic input (the first real-GPU run of the code written since
# 2026-11-23: the ATLAS family, MAC's memories, the phi* memory): 8 inputs at once (processes share the card; each CPU
# trainer on 2 cores), so that it leaves the timings below their time
JOBS=8 step 240 make test_gpu > "$OUT/test_gpu.log" 2>&1; echo "make test_gpu: rc $?"; grep -vE "^ok|^===" "$OUT/test_gpu.log" | tail -n 25
echo "t = $((SECONDS - S)) s"
# where a chunk's cycles go: block 0's cycles between barriers by the barrier's source line (memlab -P 1, the
# barrier-timing build), v7 (TF32) and v8 (3xTF32), T = 1024
for v in 7 8; do step 40 ./memlab_phase -p titans -T 1024 -c 0 -r 1 -v $v -P 1 > "$OUT/phase_v$v.txt" 2>&1
    echo "== titans barrier timing v$v (rc $?)"; grep -A 14 -E "^v$v (forward|backward)" "$OUT/phase_v$v.txt"; done
# issue 9's linear memories: the b = 1 delta rule token by token (v6, the default) against the WY chunk kernels
# (v9 single kernels, v10 split, 3xTF32; v11 split, v12 split with T = (I + L)^-1, TF32) at the bench shape, then whole
# steps with MIRAS_MEM_WY=1 and 3 (the presets without it are in the per-preset loop below) and ncu of the WY kernels
for v in 6 9 10 11 12; do step 60 ./memlab -p gated_deltanet -r 3 -c 1 -v $v >> "$LAB" 2>&1; echo "== gated_deltanet T=4096 v$v (rc $?)"; tail -n 1 "$LAB"; done
for cfg in "gated_deltanet 1" "gated_deltanet 3" "deltanet 1"; do set -- $cfg
    MIRAS_MEM_WY=$2 PRESET=$1 REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | grep -E "^train_miras_cu|failed" | sed "s/^/$1 WY=$2: /"; done
step 40 ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --launch-count 6 \
    -k regex:wy_ ./memlab -p gated_deltanet -T 1024 -c 0 -r 1 -v 11 > "$OUT/ncu_wy.txt" 2>&1
grep -E "^  [a-z_]+kernel|Duration|Throughput|Warp Cycles Per|Issued Ipc|No Eligible|Registers Per" "$OUT/ncu_wy.txt" | head -48
echo "t = $((SECONDS - S)) s"
# whole training runs of the 100M titans (bench_gpu.sh's model), 4 steps: the median step of 2..4
python3 - build/rand_train_000000.bin $((6 * 8 * 4096 + 1)) <<'PY'
import random, struct, sys
path, n = sys.argv[1], int(sys.argv[2]); random.seed(0)
h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, n
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *h)); f.write(struct.pack("<%dH" % n, *[random.randrange(50257) for _ in range(n)]))
PY
for cfg in "0 3" "2 1" "2 0"; do set -- $cfg
    step 60 env MIRAS_MEM_TC=$2 ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 -b 4 -t 4096 -x 4 -u 1 -v 0 -g 0 -n 0 -f $1 \
        -i "build/rand_train_*.bin" -j none -z none -o build/bench > "$OUT/step.log" 2>&1
    echo "titans 100M step -f $1 MIRAS_MEM_TC=$2 (rc $?):"; grep -E "^step" "$OUT/step.log" | tail -3; cat "$OUT/step.log" >> "$OUT/steps.log"
done
# B=8 at T=4096 (issue 9: fits with the chunk-start states checkpointed; the trainer prints the ck it chose), and B=4
# with ck = 8 forced (the recompute's cost against the ck = 1 run above)
for cfg in "8 auto" "4 8"; do set -- $cfg
    ckenv=""; [ "$2" = auto ] || ckenv="MIRAS_MEM_CKPT=$2"
    step 90 env $ckenv ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 -b $1 -t 4096 -x 4 -u 1 -v 0 -g 0 -n 0 \
        -f 2 -i "build/rand_train_*.bin" -j none -z none -o build/bench > "$OUT/step.log" 2>&1
    echo "titans 100M step -f 2 B=$1 ck $2 (rc $?):"; grep -E "^memory states|^step|rror" "$OUT/step.log" | tail -4; cat "$OUT/step.log" >> "$OUT/steps.log"
done
# decode (issue 9): the 100M titans' per-token latency at B = 1 next to its floor, bf16 and fp32 weights
for f in 2 0; do
    DECODE=1 REF=0 step 90 bash dev/bench_gpu.sh 1 64 2 $f 2>&1 | grep -E "^decode|failed" | sed "s/^/titans -f $f: /"; done
echo "t = $((SECONDS - S)) s"
# (the L2 bytes and stall reasons test memlab_notes.md's estimate that the deep memories are bound by each SM's
# path to L2: lts__t_bytes over 48 blocks x 16 chunks at T = 256 is the traffic per chunk)
NCU="ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis --metrics lts__t_bytes.sum,dram__bytes.sum --launch-count 1"
step 40 $NCU -k regex:memory_backward ./memlab -p titans -T 256 -c 0 -r 1 -v 7 > "$OUT/ncu_bwd.txt" 2>&1
step 30 $NCU -k regex:memory_forward ./memlab -p titans -T 256 -c 0 -r 1 -v 7 >> "$OUT/ncu_bwd.txt" 2>&1
grep -E "Duration|Throughput|Warp Cycles Per|Issued Ipc|No Eligible|Registers Per|Stall|stalled|lts__t_bytes|dram__bytes|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/ncu_bwd.txt" | head -40
echo "t = $((SECONDS - S)) s"
for p in ttt_mlp yaad moneta memora; do
    step 40 ./memlab -p $p -r 3 -c 0 -v 7 >> "$LAB" 2>&1; echo "== $p (rc $?)"; tail -n 1 "$LAB"; done
# the README's per-preset table: whole steps of every preset at -f 2 (bf16 GEMMs, TF32 memory products); then
# Lattice (issue 13: its tok/s next to titans), the Titans layers and Transformer++ (their GPU code is new)
for p in titans ttt_mlp yaad moneta memora deltanet gated_deltanet linear_attn lattice mal mag mac transformer; do
    PRESET=$p REF=0 step 60 bash dev/bench_gpu.sh 4 4096 4 2 2>&1 | grep -E "^train_miras_cu|failed" | sed "s/^/$p: /"; done
echo "t = $((SECONDS - S)) s"
# data parallel on the GPU (issue 14): world size 1 through NCCL (make train_miras_cu USE_MPI=1, mpirun -np 1) must
# give the plain build's losses; needs mpicc, mpirun and nccl.h beside nvcc
if command -v mpirun >/dev/null && command -v mpicc >/dev/null && [ -f "$(dirname "$(command -v nvcc)")/../include/nccl.h" ]; then
    cp train_miras_cu build/train_miras_cu_plain
    DP="-p titans -V 50257 -D 64 -L 2 -H 2 -b 2 -t 64 -x 5 -u 1 -v 0 -g 0 -n 0 -i build/rand_train_*.bin -j none -z none"
    if step 120 make -s train_miras_cu USE_MPI=1 >> "$OUT/build.log" 2>&1; then
        step 30 build/train_miras_cu_plain $DP -o build/dp1 > "$OUT/dp_plain.log" 2>&1
        step 30 mpirun --allow-run-as-root -np 1 ./train_miras_cu $DP -o build/dp2 > "$OUT/dp_nccl.log" 2>&1
        a=$(grep -E "^step" "$OUT/dp_plain.log" | awk '{print $2, $5, $11}'); b=$(grep -E "^step" "$OUT/dp_nccl.log" | awk '{print $2, $5, $11}')
        if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "NCCL world size 1 = plain build: ok ($(echo "$a" | tail -n 1))"
        else echo "NCCL world size 1 vs plain: DIFFER"; echo "$a" | tail -n 3; echo "$b" | tail -n 3; tail -n 3 "$OUT/dp_nccl.log"; fi
    else echo "NCCL build failed"; tail -n 5 "$OUT/build.log"; fi
    cp build/train_miras_cu_plain train_miras_cu
else echo "no mpirun / nccl.h: the NCCL check (issue 14) did not run"; fi
echo "t = $((SECONDS - S)) s"
# the anchors in the same run, when a copy of ../shared/anchors is in .anchors/ (git-ignored; carry it)
[ -f .anchors/run_anchors.sh ] && OUT=$OUT step 240 bash .anchors/run_anchors.sh --only fla_gdn_bf16,titans_stack_bf16 --budget 220 2>&1 | tail -n 6
echo "total $((SECONDS - S)) s"
