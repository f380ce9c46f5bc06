#!/usr/bin/env bash
# Everything worth learning from one short GPU session about the memory kernels, in order of value, each step
# under a time guard (total budget BUDGET seconds, default 250): build; memlab on titans and the b = 1 / linear
# memories; make test_gpu (the CPU-vs-GPU checks); one whole training step of the 100M titans; ncu of the
# backward and forward kernels; local-memory traffic per function (SASS); memlab on the other presets.
# usage: OUT=dir dev/cuda/memlab_device.sh      (logs go to $OUT, default build/device)
# (the device tool brings back only a few files: keep what matters in the printed summary and in few files)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/device}; mkdir -p "$OUT"; BUDGET=${BUDGET:-250}; S=$SECONDS
left() { echo $((BUDGET - (SECONDS - S))); }
step() { local t=$1; shift; local l; l=$(left); [ "$l" -gt 5 ] || { echo "skipped (no time): $*"; return 1; }; [ "$t" -lt "$l" ] || t=$l; timeout "$t" "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
nvcc --version | tail -n 1 | tee -a "$OUT/device.txt"
make -j8 -s memlab train_miras_cu train_miras test_miras > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -20 "$OUT/build.log"; exit 1; }
echo "build: $((SECONDS - S)) s"
for p in titans deltanet gated_deltanet linear_attn; do
    case $p in titans) step 30 ./memlab -p $p -T 128 -r 1 >> "$OUT/memlab.log" 2>&1; echo "== $p T=128 check (rc $?)"; tail -n 6 "$OUT/memlab.log"; c=0 ;; *) c=2 ;; esac
    step 40 ./memlab -p $p -r 3 -c $c >> "$OUT/memlab.log" 2>&1; echo "== $p (rc $?)"; tail -n 6 "$OUT/memlab.log"; done
echo "t = $((SECONDS - S)) s"
step 80 make test_gpu > "$OUT/test_gpu.log" 2>&1; echo "make test_gpu: rc $?"; grep -vE "^ok|^===" "$OUT/test_gpu.log" | head -20
echo "t = $((SECONDS - S)) s"
# one whole training run of the 100M titans (bench_gpu.sh's model), 4 steps: the median step of 2..4
python3 - build/rand_train_000000.bin $((6 * 4 * 4096 + 1)) <<'PY'
import random, struct, sys
path, n = sys.argv[1], int(sys.argv[2]); random.seed(0)
h = [0] * 256; h[0], h[1], h[2] = 20240520, 1, n
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *h)); f.write(struct.pack("<%dH" % n, *[random.randrange(50257) for _ in range(n)]))
PY
step 50 ./train_miras_cu -p titans -V 50257 -D 768 -L 8 -H 12 -E 4 -b 4 -t 4096 -x 4 -u 1 -v 0 -g 0 -n 0 -f 0 \
    -i "build/rand_train_*.bin" -j none -z none -o build/bench > "$OUT/step_titans.log" 2>&1; echo "titans step (rc $?):"; grep -E "^step|params" "$OUT/step_titans.log" | tail -4
echo "t = $((SECONDS - S)) s"
NCU="ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --launch-count 1"
step 30 $NCU -k regex:memory_backward ./memlab -p titans -T 256 -c 0 -r 1 -v 4 > "$OUT/ncu_bwd.txt" 2>&1
step 25 $NCU -k regex:memory_forward ./memlab -p titans -T 256 -c 0 -r 1 -v 4 > "$OUT/ncu_fwd.txt" 2>&1
cat "$OUT/ncu_fwd.txt" >> "$OUT/ncu_bwd.txt"; rm -f "$OUT/ncu_fwd.txt"
grep -E "Duration|Elapsed Cycles|Throughput|Stall|Warp Cycles Per|Issued Ipc|No Eligible|L1/TEX Hit|L2 Hit" "$OUT/ncu_bwd.txt" | head -40
if command -v cuobjdump >/dev/null; then   # local-memory instructions (register saves, spills) per memory function
    cuobjdump -sass train_miras_cu 2>/dev/null | awk '/Function : /{f=$3} /STL|LDL/{c[f]++} END{for (k in c) print c[k], k}' | sort -rn | head -12
fi
echo "t = $((SECONDS - S)) s"
for p in ttt_mlp moneta yaad memora; do
    step 40 ./memlab -p $p -r 3 -c 0 >> "$OUT/memlab.log" 2>&1; echo "== $p (rc $?)"; tail -n 5 "$OUT/memlab.log"; done
echo "total $((SECONDS - S)) s"
