#!/usr/bin/env bash
# Gradient norm at initialisation against sequence length, for every preset (a benchmark, not a test).
# usage: dev/bench_long.sh [PRESETS] [LENGTHS]      env: FLAGS="extra train_miras flags", BIN=./train_miras,
#        SHAPE="-D 64 -L 2 -H 2" (the model's sizes; e.g. on a GPU: BIN=./train_miras_cu SHAPE="-D 768 -L 8 -H 12 -E 4" FLAGS="-f 2")
# Model: D=64 L=2 H=2 (E=2), byte-level tinyshakespeare (../shared/data) or, without it, this repository's
# own sources; one sequence (B=1) from the start of the train split; the printed norm is the global
# gradient norm of step 1 before clipping (train_miras' "norm"). One line per preset, a column per T.
set -u
cd "$(dirname "$0")/.."
presets=${1:-"titans moneta yaad memora ttt_mlp linear_attn deltanet gated_deltanet"}
lengths=${2:-"256 1024 4096 16384"}
BIN=${BIN:-./train_miras}
make -s train_miras data_prep >/dev/null || exit 1
out=build/bench_long; mkdir -p $out
if [ -f ../shared/data/tinyshakespeare.txt ]; then src=../shared/data/tinyshakespeare.txt; name=tinyshakespeare
else src="train_miras.c test_miras.c README.md dev/reference.py"; name=repo; fi
[ -f $out/${name}_train_000000.bin ] || data_prep/text2shards -q -t byte -v 0.1 -o $out/$name $src || exit 1
printf "| preset |"; for T in $lengths; do printf " T=%s |" $T; done; printf " max/min |\n"
printf "|---|"; for T in $lengths; do printf "%s" "---|"; done; printf -- "---|\n"
for p in $presets; do
    printf "| %s |" "$p"; norms=""
    for T in $lengths; do
        line=$($BIN -p $p ${SHAPE:--D 64 -L 2 -H 2} -b 1 -t $T -x 1 -u 1 -v 0 -g 0 -n 0 ${FLAGS:-} -o $out -i "$out/${name}_train_*.bin" -j none -z none 2>&1)
        n=$(printf '%s\n' "$line" | grep -oE '[|] norm [^ ]+' | head -n 1 | awk '{print $3}')
        if [ -z "$n" ]; then n=$(printf '%s\n' "$line" | grep -oE 'not finite [(][a-z]+[)]' | head -n 1 | grep -oE 'nan|inf'); n=${n:-fail}; fi
        printf " %s |" "$n"; norms="$norms $n"
    done
    echo "$norms" | awk '{mn = 1e300; mx = 0; ok = 1; for (i = 1; i <= NF; i++) { if ($i !~ /^[0-9.e+-]+$/) { ok = 0; break }
        v = $i + 0; if (v < mn) mn = v; if (v > mx) mx = v } if (ok) printf " %.2f |\n", mx / mn; else print " diverged |" }'
done
