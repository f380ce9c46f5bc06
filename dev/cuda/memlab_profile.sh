#!/usr/bin/env bash
# Where the memory kernels spend their time: ncu's warp-state sampling of one memory_backward_kernel and one
# memory_forward_kernel (memlab, titans, T=256), summed per device function of the SASS, the top ones printed.
# usage (on a GPU): OUT=dir dev/cuda/memlab_profile.sh [memlab version, default 7] [preset, default titans]
# (builds memlab with -lineinfo; writes $OUT/prof_{bac,for}.txt, the top functions and instructions, the SASS views
# as csv.gz, and $OUT/details_{bac,for}.txt, the report's sections as text)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/device}; mkdir -p "$OUT"; V=${1:-7}; P=${2:-titans}
[ -x memlab ] || make -s memlab NVCC="nvcc -lineinfo" || { echo "memlab: build failed"; exit 1; }
for k in backward forward; do
    rep=build/prof_$k
    # (--clock-control none: the card's clocks as found; the two byte counts give the L2 and DRAM traffic per chunk)
    timeout 150 ncu --clock-control none --set full --metrics lts__t_bytes.sum,dram__bytes.sum --import-source yes \
        --launch-count 1 -k regex:memory_${k}_kernel -f -o $rep ./memlab -p $P -T 256 -c 0 -r 1 -v $V \
        > "$OUT/ncu_$k.log" 2>&1 || { echo "ncu $k failed"; tail -5 "$OUT/ncu_$k.log"; continue; }
    ncu --import $rep.ncu-rep --page details > "$OUT/details_${k:0:3}.txt" 2>&1  # every section's numbers, as text
    # the SASS view carries the per-instruction samples (the CUDA-source view, --print-source cuda, has none in 2025.x's CSV)
    ncu --import $rep.ncu-rep --page source --csv --print-source sass > build/src_$k.csv 2> build/src_$k.err
    gzip -c build/src_$k.csv > "$OUT/sass_${k:0:3}.csv.gz"
    python3 - build/src_$k.csv > "$OUT/prof_${k:0:3}.txt" <<'PY'
# per function: the SASS lists the kernel's functions one after another, each ending in a RET; sum the
# warp-state samples and the executed instructions between RETs (HMMA, MUFU, BAR counts identify them)
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hi = next((i for i, r in enumerate(rows) if "Warp Stall Sampling (All Samples)" in r), None)
if hi is None: print("no sampling column"); sys.exit(0)
h = rows[hi]; ci = h.index("Warp Stall Sampling (All Samples)"); ie = h.index("Instructions Executed"); si = h.index("Source")
num = lambda x: int(float(x.replace(",", "") or 0)) if x.replace(",", "").replace(".", "").isdigit() else 0
segs, cur = [], None
for r in rows[hi + 1:]:
    if len(r) <= max(ci, ie): continue
    if cur is None: cur = dict(addr=r[0], s=0, e=0, n=0, hmma=0, mufu=0, bar=0)
    t = r[si]; cur["s"] += num(r[ci]); cur["e"] += num(r[ie]); cur["n"] += 1
    cur["hmma"] += "HMMA" in t; cur["mufu"] += "MUFU" in t; cur["bar"] += "BAR.SYNC" in t
    if "RET" in t: segs.append(cur); cur = None
if cur: segs.append(cur)
tot = sum(x["s"] for x in segs) or 1
print("functions (RET-delimited SASS segments) by share of warp-state samples; %d samples" % tot)
for x in sorted(segs, key=lambda x: -x["s"])[:20]:
    print("%5.1f%%  at %s  %5d instr  %11d executed  HMMA %3d  MUFU %3d  BAR %2d" % (100 * x["s"] / tot, x["addr"], x["n"], x["e"], x["hmma"], x["mufu"], x["bar"]))
# and the single instructions with the most samples (a load's samples mostly land on the first instruction that
# uses its result: read the lines just above each)
body = [r for r in rows[hi + 1:] if len(r) > max(ci, si)]
print("instructions by share of warp-state samples:")
for r in sorted(body, key=lambda r: -num(r[ci]))[:15]:
    print("%5.1f%%  at %s  %s" % (100 * num(r[ci]) / tot, r[0], r[si][:90]))
PY
    echo "== $k: top functions"; head -n 22 "$OUT/prof_${k:0:3}.txt"
done
# the stall reasons, accesses and hottest instructions per function of both kernels (what run 7's
# stalls_by_function.txt was made from by hand)
python3 dev/cuda/sass_stalls.py "$OUT"/sass_bac.csv.gz "$OUT"/sass_for.csv.gz > "$OUT/stalls_by_function.txt" 2>&1
