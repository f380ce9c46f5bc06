#!/usr/bin/env bash
# Recall at length (a benchmark, not a test): S-NIAH trained at a short length and scored at longer ones.
# usage: dev/recall.sh [PRESETS]     env: STEPS=800 TRAIN_T=256 EVAL="256 1024 2048 4096" EVAL_N=100 JOBS=2 OUT=build/recall
#        THREADS=1 (OpenMP threads per run); TRAIN=0 only scores the checkpoints of an earlier run (e.g. TRAIN=0 EVAL="8192 16384" EVAL_N=50)
#        CKPT=50: checkpoint interval; a run killed part way resumes there (bit for bit) when the script runs again,
#        one that finished (<dir>/trained) is only scored; BIN=./train_miras the trainer (a pinned copy keeps a
#        resumed run bit for bit when the source changes between the sessions); FLAGS="-X 0.03" more trainer flags
#        for the training runs
# Task: data_prep/synth niah, byte level, a 5-digit passkey in a repeated filler sentence at a random depth,
# asked for at the end; -A 1 (loss on the 5 answer digits only). Model: D=64 L=2 H=2 E=2, B=8, lr 3e-3, one
# OpenMP thread per run, JOBS runs at once. Then the final checkpoint is scored (answer accuracy per digit,
# chance 0.1) on 100 fresh examples at each length of EVAL: the memory must carry the needle across up to
# 16x the trained length. One README table row per preset.
set -u
cd "$(dirname "$0")/.."
presets=${1:-"titans yaad moneta memora linear_attn deltanet gated_deltanet"}
STEPS=${STEPS:-800}; THREADS=${THREADS:-1}; TT=${TRAIN_T:-256}; EVAL=${EVAL:-"256 1024 2048 4096"}; JOBS=${JOBS:-2}; OUT=${OUT:-build/recall}
EVAL_N=${EVAL_N:-100}; TRAIN=${TRAIN:-1}; CKPT=${CKPT:-50}; BIN=${BIN:-./train_miras}; FLAGS=${FLAGS:-}
make -s train_miras data_prep >/dev/null || exit 1
mkdir -p $OUT/data
[ -f $OUT/data/niah_train${TT}_train_000000.bin ] || data_prep/synth niah -o $OUT/data/niah_train$TT -T $TT -n 40000 -m 200 -S 21 -f repeat >/dev/null || exit 1
for T in $EVAL; do
    [ -f $OUT/data/niah_eval${T}_val_000000.bin ] || data_prep/synth niah -o $OUT/data/niah_eval$T -T $T -n 1 -m $EVAL_N -S $((100 + T)) -f repeat >/dev/null || exit 1
done
train() {
    local p=$1 o=$OUT/niah_$1; mkdir -p $o
    if [ "$TRAIN" = 1 ] && [ ! -f $o/trained ]; then  # (a run stopped part way resumes from its last checkpoint)
        local r=""; [ -f $o/ckpt.bin ] && r="-r 1"
        if [ -n "$r" ]; then echo "resuming $p from $o/ckpt.bin" >> $o/stdout.txt; else : > $o/stdout.txt; fi
        # shellcheck disable=SC2086  # (FLAGS: several words)
        OMP_NUM_THREADS=$THREADS $BIN -p $p $FLAGS -D 64 -L 2 -H 2 -b 8 -t $TT -x $STEPS -v $STEPS -m 25 -g 0 -n $CKPT -A 1 $r \
            -i "$OUT/data/niah_train${TT}_train_*.bin" -j "$OUT/data/niah_train${TT}_val_*.bin" -z $OUT/data/niah_train${TT}_tokenizer.bin \
            -o $o >> $o/stdout.txt 2>&1 && touch $o/trained || { echo "$p: training stopped (rerun to resume)"; return; }
    fi
    for T in $EVAL; do
        OMP_NUM_THREADS=$THREADS $BIN -e $o/ckpt.bin -x 0 -b 1 -t $T -m $EVAL_N -A 1 -g 0 -j "$OUT/data/niah_eval${T}_val_*.bin" \
            -i "$OUT/data/niah_eval${T}_train_*.bin" -z none -o $o/eval$T > $o/eval$T.txt 2>&1
    done
}
running=0
for p in $presets; do
    train $p & running=$((running + 1))
    if [ $running -ge $JOBS ]; then wait -n; running=$((running - 1)); fi
done
wait
printf "| preset | params |"; for T in $EVAL; do printf " acc T=%s |" $T; done; printf " train tok/s |\n"
printf "|---|---|"; for T in $EVAL; do printf -- "---|"; done; printf -- "---|\n"
for p in $presets; do
    o=$OUT/niah_$p
    params=$(grep -m1 -oE '[0-9]+ params' $o/stdout.txt | awk '{print $1}')
    tps=$(grep -oE 'tok/s:[0-9.]+' $o/log.txt 2>/dev/null | cut -d: -f2 | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n}')
    printf "| %s | %s |" $p "${params:-?}"
    for T in $EVAL; do a=$(grep -oE 'acc(uracy)?[: ]+[0-9.]+' $o/eval$T.txt | tail -n1 | grep -oE '[0-9.]+$'); printf " %s |" "${a:-fail}"; done
    printf " %s |\n" "${tps:-?}"
done
