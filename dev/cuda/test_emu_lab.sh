#!/usr/bin/env bash
# The memory kernels' versions against the CPU on the CUDA emulator (no GPU): dev/cuda/memlab.cu at small shapes,
# built for dev/cuda/emu, for the SIMT products (v4), the tensor-core TF32 products (v7) and 3xTF32 (v8), at shapes
# with whole and partial 16 x 8 tiles; and the WY chunk kernels of the b = 1 delta rule (v9 the single kernels, v10 the
# split ones, 3xTF32; v11 the split in TF32, v12 with T = (I + L)^-1) over two whole chunks of 64 tokens and a partial
# one; v4's per-token kernels of the delta rule at d = 64; v15, v16 (k in quads) at the first two shapes, v17, v18
# (split K) at the first; v13-v20 at titans' width; v19, v20 (the cluster split) at 5 more shapes and settings. One
# check per (shape, version): the norm-relative error of y and every gradient against the CPU's chunk functions
# within memlab's tolerance (1e-3; v7 5e-2); a NaN or an unwritten output fails (memlab poisons the outputs).
# Then thread block clusters (dev/cuda/cluster_check.cu): the emulator's clusters give the right sums through
# distributed shared memory at 4 shapes, and both planted mistakes fail (a missing cluster.sync before the reads:
# NaN; a missing one before the exit: the exited CTA's memory is refused).
# And the barrier-timing build of memlab (-P 1) runs and prints its table. Part of `make ci`; the last line is
# "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
for t in g++ python3; do
    command -v $t >/dev/null || { echo "# 50 check(s) skipped: no $t (the emulator build needs g++ and python3)"; echo "0 passed, 0 failed"; exit 0; }
done
configs=(
  "-p titans -d 16 -E 4 -k 16 -T 48"        # whole tiles: n = 16, d = 16, dm = 64
  "-p titans -d 12 -E 2 -k 5 -T 23"         # partial tiles, a partial last chunk
  "-p memora -d 16 -E 2 -k 8 -T 32"
  "-p deltanet -d 12 -k 16 -T 37"           # a linear memory through the chunk kernels (b = 16)
)
runs=()
for c in "${configs[@]}"; do for v in 4 7 8; do runs+=("$v|$c"); done; done
for c in "${configs[@]:0:2}"; do for v in 15 16; do runs+=("$v|$c"); done; done   # k in quads (K = 16), and not (d = 12)
for v in 17 18; do runs+=("$v|${configs[0]}"); done   # and K split (the 16 x 64 products over K = 64)
for v in 9 10 11 12; do runs+=("$v|-p gated_deltanet -d 64 -k 1 -T 150"); done   # (d = 64: the only head width they take)
# v4's per-token kernels of the b = 1 delta rule (mem_token_*_kernel, d = 64): the trainer takes v6's for every
# configuration they take, so this is their only check (a mutant in their backward passed all of dev/test_gpu.sh)
runs+=("4|-p gated_deltanet -d 64 -k 1 -T 40")
for r in "${runs[@]}"; do
    v=${r%%|*}; c=${r#*|}
    out=$(bash dev/cuda/memlab_emu.sh $c -B 1 -H 2 -r 1 -v $v 2>&1); rc=$?
    row=$(printf '%s\n' "$out" | grep -E "^v$v +[0-9.]+ +[0-9.]+ " | tail -n 1)
    if [ $rc -eq 0 ] && [ -n "$row" ] && ! printf '%s' "$row" | grep -q FAIL; then
        echo "ok - memlab on the emulator, $c, v$v: max rel err $(echo "$row" | awk '{print $4}')"; pass=$((pass + 1))
    else
        echo "not ok - memlab on the emulator, $c, v$v (exit $rc): ${row:-$(printf '%s\n' "$out" | tail -n 3)}"; fail=$((fail + 1))
    fi
done
# v19, v20 (v17's, v18's products with the deep memory split over a cluster of CTAs per (sequence, head), each with a
# slice of dm, partial sums added through distributed shared memory): within tolerance against the CPU, and the split
# taken (memlab prints its shape; without that line these checks could pass on an unsplit path); whole and partial
# tiles (dm / 4 = 16, 8 and 24, a partial last chunk; dm / 4 < d: mem_update_backward's gx rows are wider than the
# slice), momentum, gd, Huber, Moneta's lq and Memora's kl retentions, 2 CTAs, 128 threads per CTA, the threads of a
# cluster's CTAs run in a random order (a race on the exchange buffer's halves would show there)
sruns=(
  "19|4||${configs[0]}"
  "20|4||${configs[0]}"
  "20|4||-p titans -d 16 -E 2 -k 5 -T 23"
  "20|4||-p titans -d 48 -E 2 -k 7 -T 19"
  "20|4||-p yaad -d 16 -E 2 -k 5 -T 23"
  "20|4||-p ttt_mlp -d 16 -E 2 -k 5 -T 23"
  "20|4||-p moneta -d 16 -E 2 -k 5 -T 23"
  "20|4||-p memora -d 16 -E 2 -k 5 -T 23"
  "20|2|MIRAS_MEM_THREADS=128|${configs[0]}"
  "20|4|EMU_ORDER=rand:5|${configs[0]}"
)
for r in "${sruns[@]}"; do
    IFS='|' read -r v S e c <<< "$r"
    out=$(env $e bash dev/cuda/memlab_emu.sh $c -B 1 -H 2 -r 1 -v $v -S $S 2>&1); rc=$?
    row=$(printf '%s\n' "$out" | grep -E "^v$v +[0-9.]+ +[0-9.]+ " | tail -n 1)
    sp=$(printf '%s\n' "$out" | grep -E "^v$v +split: clusters of $S CTAs" | head -n 1)
    if [ $rc -eq 0 ] && [ -n "$row" ] && ! printf '%s' "$row" | grep -q FAIL && [ -n "$sp" ]; then
        echo "ok - memlab on the emulator, $c $e, v$v split: max rel err $(echo "$row" | awk '{print $4}'); ${sp#*split: }"; pass=$((pass + 1))
    else
        echo "not ok - memlab on the emulator, $c $e, v$v split over $S (exit $rc): ${row:-$(printf '%s\n' "$out" | tail -n 3)}; ${sp:-the split did not run}"; fail=$((fail + 1))
    fi
done
# v13-v18 (v7's and v8's products in 16 x 16 warp tiles, where a product has at least one per warp: titans' own
# width, d = 64, dm = 256; v15, v16 also with k in quads, v17, v18 also with K split in the narrow products): within
# tolerance, v13 and v14 value for value equal to v7's and v8's outputs (the same sums), and the wide tiles (quads,
# splits) taken (the emulator counts them; without the counts these checks could pass on the plain path)
out=$(bash dev/cuda/memlab_emu.sh -p titans -d 64 -E 4 -k 16 -T 32 -B 1 -H 2 -r 1 2>&1); rc=$?
for pr in "13 7" "14 8" "15 -" "16 -" "17 -" "18 -"; do
    set -- $pr
    row=$(printf '%s\n' "$out" | grep -E "^v$1 +[0-9.]+ +[0-9.]+ " | tail -n 1)
    eq=$(printf '%s\n' "$out" | grep -E "^v$1 +outputs: equal to v$2's")
    [ "$2" = - ] && eq="k permuted: compared with the CPU only"
    cnt=$(printf '%s\n' "$out" | grep -E "^v$1 +products in 16 x 16 warp tiles: ")
    num() { echo "$cnt" | sed -nE "s/.*$1: ([0-9]+).*/\1/p"; }
    nw=$(num "warp tiles"); nq=$(num "quads"); ns=$(num "K split")
    [ "$1" -ge 15 ] || nq=1; [ "$1" -ge 17 ] || ns=1  # (v13, v14 take no quads; v13-v16 no split)
    if [ $rc -eq 0 ] && [ -n "$row" ] && ! printf '%s' "$row" | grep -q FAIL && [ -n "$eq" ] && [ "${nw:-0}" -gt 0 ] &&
        [ "${nq:-0}" -gt 0 ] && [ "${ns:-0}" -gt 0 ]; then
        echo "ok - memlab on the emulator, titans d=64 dm=256, v$1: max rel err $(echo "$row" | awk '{print $4}'), ${eq#*outputs: }; products in 16 x 16 warp tiles: ${cnt#*tiles: }"
        pass=$((pass + 1))
    else
        echo "not ok - memlab on the emulator, titans d=64 dm=256, v$1 (exit $rc): ${row:-no row}; ${eq:-outputs not equal to those of v$2}; ${cnt:-no wide-tile count}"
        fail=$((fail + 1))
    fi
done
# and v19, v20 (the split, 4 CTAs of 64 hidden units) at titans' width, from the same run
for v in 19 20; do
    row=$(printf '%s\n' "$out" | grep -E "^v$v +[0-9.]+ +[0-9.]+ " | tail -n 1)
    sp=$(printf '%s\n' "$out" | grep -E "^v$v +split: clusters of 4 CTAs" | head -n 1)
    if [ $rc -eq 0 ] && [ -n "$row" ] && ! printf '%s' "$row" | grep -q FAIL && [ -n "$sp" ]; then
        echo "ok - memlab on the emulator, titans d=64 dm=256, v$v split: max rel err $(echo "$row" | awk '{print $4}'); ${sp#*split: }"; pass=$((pass + 1))
    else echo "not ok - memlab on the emulator, titans d=64 dm=256, v$v split (exit $rc): ${row:-no row}; ${sp:-the split did not run}"; fail=$((fail + 1)); fi
done
# the barrier-timing build (memlab -P 1, which a GPU session runs): its table is there and names the chunk functions
out=$(EMU_PHASE=1 bash dev/cuda/memlab_emu.sh -p titans -B 1 -H 1 -T 48 -d 16 -E 4 -r 1 -v 8 -c 1 -P 1 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "^v8 backward, block 0: [0-9]* barriers" && printf '%s\n' "$out" | grep -qE "line +[0-9]+ mm_nt_rs"; then
    echo "ok - memlab -P 1 (barrier timing) on the emulator: $(printf '%s\n' "$out" | grep -c ' line ') rows"; pass=$((pass + 1))
else echo "not ok - memlab -P 1 on the emulator (exit $rc): $(printf '%s\n' "$out" | tail -n 3)"; fail=$((fail + 1)); fi
mkdir -p build/emu
if python3 dev/cuda/emu_launch.py dev/cuda/cluster_check.cu build/emu/cluster_check.cpp 2>/dev/null &&
    g++ -std=c++17 -O1 -I. -Idev/cuda/emu -include dev/cuda/emu/cuda_runtime.h -Wno-unknown-pragmas -U_FORTIFY_SOURCE \
        -o build/emu/cluster_check build/emu/cluster_check.cpp -lm; then
    for a in "-C 4 -n 300 -g 3" "-C 2 -n 33 -g 2" "-C 8 -n 5 -g 1" "-C 1 -n 64 -g 2"; do
        out=$(build/emu/cluster_check $a 2>&1); rc=$?
        if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q ": ok$"; then echo "ok - clusters on the emulator, $a: $out"; pass=$((pass + 1))
        else echo "not ok - clusters on the emulator, $a (exit $rc): $out"; fail=$((fail + 1)); fi
    done
    for m in 1 2; do  # a planted mistake must fail, in every thread order
        bad=0
        for o in asc desc warp rand:3; do { EMU_ORDER=$o build/emu/cluster_check -m $m > /dev/null 2>&1; } 2> /dev/null && bad=1; done
        if [ $bad -eq 0 ]; then echo "ok - clusters on the emulator: mistake -m $m fails in 4 thread orders"; pass=$((pass + 1))
        else echo "not ok - clusters on the emulator: mistake -m $m passed"; fail=$((fail + 1)); fi
    done
else echo "not ok - clusters on the emulator: build failed"; fail=$((fail + 6)); fi
# the emulator's unwritten device memory reads as NaN (so that the checks above and test_emu_gpu.sh catch a kernel that
# reads what nothing wrote), and EMU_POISON=0 turns that off (the check can fail: without the poison it reads zeros)
if python3 dev/cuda/emu_launch.py dev/cuda/emu_poison_check.cu build/emu/emu_poison_check.cpp 2>/dev/null &&
    g++ -std=c++17 -O1 -I. -Idev/cuda/emu -include dev/cuda/emu/cuda_runtime.h -Wno-unknown-pragmas -U_FORTIFY_SOURCE \
        -o build/emu/emu_poison_check build/emu/emu_poison_check.cpp -lm; then
    for c in "nan -u EMU_POISON" "not-nan EMU_POISON=0"; do
        set -- $c
        if out=$(env "${@:2}" build/emu/emu_poison_check $1 2>&1); then echo "ok - emulator, unwritten cudaMalloc memory (expect $c): $out"; pass=$((pass + 1))
        else echo "not ok - emulator, unwritten cudaMalloc memory (expect $c): $out"; fail=$((fail + 1)); fi
    done
else echo "not ok - the emulator's poison check: build failed"; fail=$((fail + 2)); fi
echo "$pass passed, $fail failed"
