#!/usr/bin/env bash
# Race check on the CPU emulator: dumps (-J) of each input under five thread orders must be byte-identical
# (the kernels are deterministic; a difference means a read of another thread's write without a barrier). The orders:
# ascending, descending, random, and warp by warp both ways (EMU_ORDER=warp / warpdesc: a warp runs on through its
# shuffles and mma to its next __syncthreads before the next one starts; see dev/cuda/emu/cuda_runtime.h).
# usage: dev/cuda/emu_race.sh [inputs...]   (default: every dev/fixtures/*.bin); build with dev/cuda/emu_build.sh
set -u
cd "$(dirname "$0")/../.."
emu=build/emu/train_miras_emu; out=build/emu/race; mkdir -p $out
[ $# -gt 0 ] || set -- dev/fixtures/*.bin
pass=0; fail=0
for f in "$@"; do
    n=$(basename "$f" .bin)
    same=1
    for o in asc desc rand:7 warp warpdesc; do
        EMU_ORDER=$o $emu -J "$f" -O "$out/${n}_$o.bin" 2>"$out/${n}_$o.err" || echo "run failed: $n $o: $(head -n 1 "$out/${n}_$o.err")"
        [ "$o" = asc ] || cmp -s "$out/${n}_asc.bin" "$out/${n}_$o.bin" || { same=0; echo "# $n: $o differs from asc"; }
    done
    if [ $same = 1 ] && [ -s "$out/${n}_asc.bin" ]; then echo "ok - $n: identical under asc, desc, random and warp-by-warp thread orders"; pass=$((pass + 1))
    else echo "FAIL - $n: the thread order changes the result (a race)"; fail=$((fail + 1)); fi
done
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
