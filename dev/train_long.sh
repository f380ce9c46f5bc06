#!/usr/bin/env bash
# Real training at length: every preset on tinyshakespeare (byte level) at T = 2048 (a benchmark, not a test).
# usage: dev/train_long.sh [PRESETS]     env: STEPS=300 T=2048 OUT=build/train_long FLAGS="extra flags"
#        BIN=./train_miras (a pinned copy keeps a long run on one build while the source changes)
# Model: D=64 L=2 H=2 E=2 (about 150K parameters), B=1, lr 3e-3 (warmup 20, cosine to 10%), clip 1.0, 2 OpenMP
# threads. Prints a README table row per preset: val loss at step 0 and at the end, the largest gradient norm
# before clipping over all steps, the mean tok/s, and whether any step failed; logs in $OUT/PRESET/log.txt.
set -u
cd "$(dirname "$0")/.."
presets=${1:-"titans moneta yaad memora ttt_mlp linear_attn deltanet gated_deltanet"}
STEPS=${STEPS:-300}; T=${T:-2048}; OUT=${OUT:-build/train_long}; BIN=${BIN:-./train_miras}
make -s train_miras data_prep >/dev/null || exit 1
[ -f ../shared/data/tinyshakespeare.txt ] || { echo "needs ../shared/data/tinyshakespeare.txt"; exit 1; }
data=$OUT/data/tinyshakespeare_byte
[ -f ${data}_train_000000.bin ] || { mkdir -p $OUT/data; data_prep/text2shards -q -t byte -v 0.1 -o $data ../shared/data/tinyshakespeare.txt || exit 1; }
echo "| preset | params | val loss step 0 | val loss step $STEPS | max grad norm | tok/s | steps failed |"
echo "|---|---|---|---|---|---|---|"
for p in $presets; do
    o=$OUT/$p; mkdir -p $o
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} $BIN -p $p -D 64 -L 2 -H 2 -b 1 -t $T -x $STEPS -v 50 -m 4 -g 0 -n 0 ${FLAGS:-} \
        -i "${data}_train_*.bin" -j "${data}_val_*.bin" -z ${data}_tokenizer.bin -o $o > $o/stdout.txt 2>&1
    rc=$?
    params=$(grep -m1 -oE '[0-9]+ params' $o/stdout.txt | awk '{print $1}')
    v0=$(grep -E '^s:0 vl:' $o/log.txt | head -n1 | sed -E 's/.*vl:([0-9.]+).*/\1/')
    vN=$(grep -E "^s:$STEPS vl:" $o/log.txt | tail -n1 | sed -E 's/.*vl:([0-9.]+).*/\1/')
    mx=$(grep -oE 'norm:[^ ]+' $o/log.txt | cut -d: -f2 | sort -g | tail -n1)
    tps=$(grep -oE 'tok/s:[0-9.]+' $o/log.txt | cut -d: -f2 | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n}')
    fails=$([ $rc -eq 0 ] && echo 0 || echo "stopped: $(grep -m1 error $o/stdout.txt)")
    echo "| $p | $params | ${v0:-?} | ${vN:-?} | ${mx:-?} | ${tps:-?} | $fails |"
done
